package continuity.artemis.replication;

import java.util.EnumSet;
import java.util.function.Consumer;
import java.util.function.Function;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQBuffers;
import org.apache.activemq.artemis.api.core.ICoreMessage;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.persistence.Persister;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.PacketImpl;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.MessagePacketI;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.apache.activemq.artemis.spi.core.protocol.EmbedMessageUtil;

/**
 * The bridge engine's receiving end: a copy that a core bridge of another datacentre delivered to an inbound address
 * (under the inbound prefix) goes on to the address it was diverted from at its source.
 *
 * At the source a divert per remote datacentre copies a message into that datacentre's outbound queue (a divert, not
 * a queue on the group's wildcard: anycast queues of one address share its messages, diverts each get a copy), which
 * gives the copy the outbound queue's address and records the original in Message.HDR_ORIGINAL_ADDRESS. A bridge
 * cannot send a message anywhere but to its forwarding address or the message's own, and a broker plugin's beforeSend
 * cannot redirect one either (the session keeps the address it read before calling it), so the redirection happens
 * in a core incoming interceptor (InboundCopies registers it for the peers' connections): it runs before the session,
 * so the target's auto-creation and its security check apply to the copy's own address, as for a client's send.
 */
final class CopyForwarding {
   // Where EmbedMessageUtil keeps the encoded header of a large AMQP message inside its core wrapper.
   private static final String EMBEDDED_LARGE_HEADER = "_AMQP_EMBED_LARGE";

   private final String inboundPrefix;
   private final StagingDelays staging;
   private final Function<SimpleString, AddressInfo> addresses;
   private final Consumer<SimpleString> noticeAddresses;

   /**
    * addresses: the broker's address of a name (null if none); noticeAddresses: creates a notice address (multicast)
    * when it does not exist.
    */
   CopyForwarding(String inboundPrefix, StagingDelays staging, Function<SimpleString, AddressInfo> addresses,
                  Consumer<SimpleString> noticeAddresses) {
      this.inboundPrefix = inboundPrefix;
      this.staging = staging;
      this.addresses = addresses;
      this.noticeAddresses = noticeAddresses;
   }

   /** A packet another datacentre's broker sent: a copy in it goes on to its original address. */
   void forward(Packet packet) {
      if (!(packet instanceof MessagePacketI send)) {
         return;
      }
      if (packet.getType() == PacketImpl.SESS_SEND) {
         // A message from an AMQP producer travels embedded in a core message; its own address is the one that counts.
         ICoreMessage wire = (ICoreMessage) send.getMessage();
         Message message = EmbedMessageUtil.extractEmbedded(wire, null);
         if (sendOn(message) && message != wire) {
            send.replaceMessage(EmbedMessageUtil.embedAsCoreMessage(message));
         }
      } else if (packet.getType() == PacketImpl.SESS_SEND_LARGE) {
         // The first packet of a large message: its header (the body follows).
         ICoreMessage header = (ICoreMessage) send.getMessage();
         if (header.getType() != Message.LARGE_EMBEDDED_TYPE) {
            sendOn(header);
         } else {
            Message message = EmbedMessageUtil.extractEmbedded(header, null);
            if (sendOn(message)) {
               header.putBytesProperty(EMBEDDED_LARGE_HEADER, encoded(message));
            }
         }
      }
   }

   /** Gives an inbound copy its original address, routing type, identity and delivery time; false if not one. */
   boolean sendOn(Message message) {
      // An AMQP message reads its sections on first access, which would undo changes made before it.
      message.getRoutingType();
      String address = message.getAddress();
      Object original = message.getBrokerProperty(Message.HDR_ORIGINAL_ADDRESS);
      if (address == null || !address.startsWith(inboundPrefix) || original == null) {
         return false;
      }
      SimpleString target = SimpleString.of(original.toString());
      IdentityStamping.stampCopy(message);
      message.setAddress(target);
      if (staging.noticedAt(target.toString()) != null) {
         // A notice is applied while it is routed and kept nowhere: its address has no queue.
         noticeAddresses.accept(target);
         message.setRoutingType(RoutingType.MULTICAST);
      } else {
         message.setRoutingType(routingType(message, target));
         staging.schedule(message, System.currentTimeMillis());
      }
      message.reencode();
      return true;
   }

   /**
    * The original's routing type when it had one (a core producer's); else what the address decided at the source,
    * which the copy does not carry: multicast if the address here is multicast only, else anycast, as the broker's
    * auto-creation does for a client. A copy without a routing type would be dropped, not auto-created.
    */
   private RoutingType routingType(Message message, SimpleString target) {
      Object original = message.getBrokerProperty(Message.HDR_ORIG_ROUTING_TYPE);
      if (original instanceof Number type) {
         return RoutingType.getType(type.byteValue());
      }
      AddressInfo info = addresses.apply(target);
      boolean multicastOnly = info != null && EnumSet.of(RoutingType.MULTICAST).equals(info.getRoutingTypes());
      return multicastOnly ? RoutingType.MULTICAST : RoutingType.ANYCAST;
   }

   private static byte[] encoded(Message message) {
      Persister<Message> persister = message.getPersister();
      byte[] bytes = new byte[persister.getEncodeSize(message)];
      ActiveMQBuffer buffer = ActiveMQBuffers.wrappedBuffer(bytes);
      buffer.resetWriterIndex();
      persister.encode(buffer, message);
      return bytes;
   }
}
