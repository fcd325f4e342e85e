/*
 * The bridge engine's receiving end: a copy that a core bridge of another datacentre delivered to an inbound address
 * (under the prefix this plugin is given) goes on to the address it was diverted from at its source.
 *
 * At the source a divert per remote datacentre copies a message into that datacentre's outbound queue (a divert, not
 * a queue on the group's wildcard: anycast queues of one address share its messages, diverts each get a copy), which
 * gives the copy the outbound queue's address and records the original in Message.HDR_ORIGINAL_ADDRESS. A bridge
 * cannot send a message anywhere but to its forwarding address or the message's own, and a broker plugin's beforeSend
 * cannot redirect one either (the session keeps the address it read before calling it), so the redirection happens
 * in a core incoming interceptor, which this plugin registers: it runs before the session, so the target's
 * auto-creation and its security check apply to the copy's own address, as for a client's send.
 *
 * Every message of a full_state group carries its identity across datacentres for the swapover's reconciliation
 * (artemis_bridge_reconcile): the source's message id in the long property continuity_source_id. An original gets
 * its own id when it is routed under one of the identity prefixes (its divert copies were made just before and carry
 * the id as Message.HDR_ORIG_MESSAGE_ID); a copy gets that id here, when it is sent on. Filters can select by it;
 * a broker's own message id is not a filter identifier. An id once stamped is kept (a moved message keeps it).
 *
 * The broker role compiles this file on the broker host against the distribution's lib/. Options (a <property> of
 * <broker-plugin> in broker.xml): inbound-prefix, identity-prefixes (comma-separated, may be empty).
 */
package continuity.artemis.replication;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQBuffers;
import org.apache.activemq.artemis.api.core.ICoreMessage;
import org.apache.activemq.artemis.api.core.Interceptor;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.persistence.Persister;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.PacketImpl;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.MessagePacketI;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.RoutingContext;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.apache.activemq.artemis.spi.core.protocol.EmbedMessageUtil;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;

public class InboundCopies implements ActiveMQServerPlugin {
   // Where EmbedMessageUtil keeps the encoded header of a large AMQP message inside its core wrapper.
   private static final String EMBEDDED_LARGE_HEADER = "_AMQP_EMBED_LARGE";
   private static final SimpleString SOURCE_ID = SimpleString.of("continuity_source_id");
   private static final SimpleString ORIGIN = SimpleString.of("continuity_origin");

   private final Interceptor interceptor = this::intercept;
   private String inboundPrefix;
   private List<String> identityPrefixes = List.of();
   private ActiveMQServer server;

   @Override
   public void init(Map<String, String> properties) {
      inboundPrefix = properties.get("inbound-prefix");
      if (inboundPrefix == null || inboundPrefix.isEmpty()) {
         throw new IllegalArgumentException("InboundCopies: the property inbound-prefix is not set");
      }
      String identity = properties.getOrDefault("identity-prefixes", "");
      identityPrefixes = Arrays.stream(identity.split(",")).map(String::trim).filter(p -> !p.isEmpty()).toList();
   }

   /** An original of a full_state group: its own message id, assigned by now, becomes its identity. */
   @Override
   public void beforeMessageRoute(Message message, RoutingContext context, boolean direct, boolean rejectDuplicates) {
      String address = message.getAddress();
      if (address == null || message.isLargeMessage() || identityPrefixes.stream().noneMatch(address::startsWith)) {
         return;
      }
      if (message.getObjectProperty(ORIGIN) == null && message.getObjectProperty(SOURCE_ID) == null) {
         message.putLongProperty(SOURCE_ID, message.getMessageID());
         message.reencode();
      }
   }

   @Override
   public void registered(ActiveMQServer server) {
      this.server = server;
      server.getRemotingService().addIncomingInterceptor(interceptor);
   }

   @Override
   public void unregistered(ActiveMQServer server) {
      server.getRemotingService().removeIncomingInterceptor(interceptor);
   }

   private boolean intercept(Packet packet, RemotingConnection connection) {
      if (!(packet instanceof MessagePacketI send)) {
         return true;
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
      return true;
   }

   /** Give an inbound copy its original address and routing type; false if it is not one. */
   private boolean sendOn(Message message) {
      // An AMQP message reads its sections on first access, which would undo changes made before it.
      message.getRoutingType();
      String address = message.getAddress();
      Object original = message.getBrokerProperty(Message.HDR_ORIGINAL_ADDRESS);
      if (address == null || !address.startsWith(inboundPrefix) || original == null) {
         return false;
      }
      SimpleString target = SimpleString.of(original.toString());
      Object sourceId = message.getBrokerProperty(Message.HDR_ORIG_MESSAGE_ID);
      if (sourceId instanceof Number id && message.getObjectProperty(SOURCE_ID) == null) {
         message.putLongProperty(SOURCE_ID, id.longValue());
      }
      message.setAddress(target);
      message.setRoutingType(routingType(message, target));
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
      AddressInfo info = server.getAddressInfo(target);
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
