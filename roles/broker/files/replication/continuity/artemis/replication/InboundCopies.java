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
 * A group active at every datacentre (a staging delay) has one option per prefix, staging-delay.<prefix> =
 * "<delay in ms> <group>", and datacentre and notice-prefix. A message produced under such a prefix is stamped with
 * its production time (continuity_produced_at) before it is routed, so the divert's copies carry it; a copy arriving
 * under it is scheduled for that time plus the delay. A consumer's acknowledgement of one of its messages (not an
 * expiry, not a removal) becomes a notice to <notice-prefix><group>, which the group's diverts put into the outbound
 * queues behind the copies; at each other datacentre the notice removes the copy it names from the same queue, or
 * the original where the message was produced. A notice that finds nothing came too late: the copy was delivered.
 * Both are counted, and the time from production to the notice's arrival is recorded, on the broker's metrics; so is
 * the time to its journal commit here (when a subscriber could see it, and a failover no longer loses it).
 *
 * Only the estate stamps the continuity_ properties above, and only the other datacentres' brokers (a session whose
 * login holds the role named by the option peer-role) deliver copies: a client's message loses those properties before
 * it is routed, and a client's send to an inbound address is not sent on (the broker's security refuses it there).
 * Nothing a client sends decides what replication does with a message.
 *
 * The broker role compiles this file on the broker host against the distribution's lib/. Options (a <property> of
 * <broker-plugin> in broker.xml): inbound-prefix, peer-role, identity-prefixes (comma-separated, may be empty), and the
 * staging delays' above.
 */
package continuity.artemis.replication;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import javax.security.auth.Subject;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQBuffers;
import org.apache.activemq.artemis.api.core.ICoreMessage;
import org.apache.activemq.artemis.api.core.Interceptor;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.filter.impl.FilterImpl;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.persistence.Persister;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.PacketImpl;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.MessagePacketI;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.MessageReference;
import org.apache.activemq.artemis.core.server.Queue;
import org.apache.activemq.artemis.core.server.RoutingContext;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.impl.AckReason;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.TransactionOperationAbstract;
import org.apache.activemq.artemis.spi.core.protocol.EmbedMessageUtil;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.security.jaas.RolePrincipal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

public class InboundCopies implements ActiveMQServerPlugin {
   // Where EmbedMessageUtil keeps the encoded header of a large AMQP message inside its core wrapper.
   private static final String EMBEDDED_LARGE_HEADER = "_AMQP_EMBED_LARGE";
   private static final SimpleString SOURCE_ID = SimpleString.of("continuity_source_id");
   private static final SimpleString ORIGIN = SimpleString.of("continuity_origin");
   private static final SimpleString PRODUCED_AT = SimpleString.of("continuity_produced_at");
   // A notice: which message (where it was produced, its identity there), on which queue, when it was produced and acknowledged.
   private static final SimpleString NOTICE_ORIGIN = SimpleString.of("continuity_notice_origin");
   private static final SimpleString NOTICE_SOURCE_ID = SimpleString.of("continuity_notice_source_id");
   private static final SimpleString NOTICE_QUEUE = SimpleString.of("continuity_notice_queue");
   private static final SimpleString NOTICE_PRODUCED_AT = SimpleString.of("continuity_notice_produced_at");
   private static final SimpleString NOTICE_ACKED_AT = SimpleString.of("continuity_notice_acked_at");
   // What only the estate stamps, so never what a client sends.
   private static final List<SimpleString> ESTATE_PROPERTIES = List.of(SOURCE_ID, ORIGIN, PRODUCED_AT, NOTICE_ORIGIN,
                                                                       NOTICE_SOURCE_ID, NOTICE_QUEUE,
                                                                       NOTICE_PRODUCED_AT, NOTICE_ACKED_AT);
   private static final String STAGING_DELAY_OPTION = "staging-delay.";
   // How long a notice waits, at most, for the copy it names to join its queue or be acknowledged: 2 s.
   private static final int NOTICE_ATTEMPTS = 200;
   private static final long NOTICE_RETRY_MILLIS = 10;
   private static final Logger LOG = LoggerFactory.getLogger(InboundCopies.class);

   /** A group active at every datacentre: its delay and the address its notices go to. */
   private record Delayed(String group, long delayMillis, String noticeAddress) { }

   /** A notice as it arrived from the datacentre {@code sender}. */
   private record Notice(String sender, String origin, Long sourceId, String queue, Long producedAt, long arrivedAt) { }

   private final Interceptor interceptor = this::intercept;
   private String inboundPrefix;
   private String peerRole;
   private List<String> identityPrefixes = List.of();
   private final Map<String, Delayed> delayedPrefixes = new LinkedHashMap<>();
   private String datacentre;
   private ActiveMQServer server;
   // Notices are sent and applied in order, away from the acknowledging and the routing thread.
   private Executor notices;
   // The local message id of each message of a delayed group here, by its identity across datacentres, until it is
   // acknowledged or removed: a notice then removes it by id (a filter would read every message of the queue).
   private final Map<String, Long> localIds = new ConcurrentHashMap<>();

   @Override
   public void init(Map<String, String> properties) {
      inboundPrefix = properties.get("inbound-prefix");
      if (inboundPrefix == null || inboundPrefix.isEmpty()) {
         throw new IllegalArgumentException("InboundCopies: the property inbound-prefix is not set");
      }
      peerRole = properties.get("peer-role");
      if (peerRole == null || peerRole.isEmpty()) {
         throw new IllegalArgumentException("InboundCopies: the property peer-role is not set");
      }
      String identity = properties.getOrDefault("identity-prefixes", "");
      identityPrefixes = Arrays.stream(identity.split(",")).map(String::trim).filter(p -> !p.isEmpty()).toList();
      String noticePrefix = properties.getOrDefault("notice-prefix", "");
      for (Map.Entry<String, String> option : properties.entrySet()) {
         if (!option.getKey().startsWith(STAGING_DELAY_OPTION)) {
            continue;
         }
         String[] value = option.getValue().trim().split(" ");
         if (value.length != 2 || noticePrefix.isEmpty()) {
            throw new IllegalArgumentException("InboundCopies: " + option.getKey() + " must be \"<delay in ms> <group>\""
                                                  + " beside a notice-prefix, got " + option.getValue());
         }
         delayedPrefixes.put(option.getKey().substring(STAGING_DELAY_OPTION.length()),
                             new Delayed(value[1], Long.parseLong(value[0]), noticePrefix + value[1]));
      }
      datacentre = properties.get("datacentre");
      if (!delayedPrefixes.isEmpty() && (datacentre == null || datacentre.isEmpty())) {
         throw new IllegalArgumentException("InboundCopies: staging delays need the property datacentre");
      }
   }

   private Delayed delayed(String address) {
      if (address == null) {
         return null;
      }
      for (Map.Entry<String, Delayed> entry : delayedPrefixes.entrySet()) {
         if (address.startsWith(entry.getKey())) {
            return entry.getValue();
         }
      }
      return null;
   }

   private Delayed noticeGroup(String address) {
      return delayedPrefixes.values().stream().filter(d -> d.noticeAddress().equals(address)).findFirst().orElse(null);
   }

   /** Whether the connection logged in as another datacentre's broker. */
   private boolean isPeer(RemotingConnection connection) {
      Subject subject = connection == null ? null : connection.getSubject();
      return subject != null && subject.getPrincipals(RolePrincipal.class).stream()
         .anyMatch(role -> peerRole.equals(role.getName()));
   }

   /**
    * A client's message loses the properties only the estate stamps. An original of a group active everywhere: the
    * time it was produced, before the diverts copy it.
    */
   @Override
   public void beforeSend(ServerSession session, Transaction tx, Message message, boolean direct,
                          boolean noAutoCreateQueue) {
      if (!isPeer(session.getRemotingConnection())) {
         boolean stripped = false;
         for (SimpleString property : ESTATE_PROPERTIES) {
            stripped |= message.removeProperty(property) != null;
         }
         if (stripped) {
            message.reencode();
         }
      }
      if (delayed(message.getAddress()) != null && message.getObjectProperty(ORIGIN) == null
            && message.getObjectProperty(PRODUCED_AT) == null) {
         message.putLongProperty(PRODUCED_AT, System.currentTimeMillis());
         message.reencode();
      }
   }

   /** An original of a full_state group: its own message id, assigned by now, becomes its identity. */
   @Override
   public void beforeMessageRoute(Message message, RoutingContext context, boolean direct, boolean rejectDuplicates) {
      String address = message.getAddress();
      Delayed noticed = noticeGroup(address);
      if (noticed != null) {
         if (message.getObjectProperty(ORIGIN) != null) {
            Notice notice = new Notice(String.valueOf(message.getObjectProperty(ORIGIN)),
                                       message.getStringProperty(NOTICE_ORIGIN),
                                       message.getLongProperty(NOTICE_SOURCE_ID),
                                       message.getStringProperty(NOTICE_QUEUE),
                                       message.getLongProperty(NOTICE_PRODUCED_AT), System.currentTimeMillis());
            notices.execute(() -> applyNotice(noticed, notice, 0));
            Transaction routing = context.getTransaction();
            if (routing != null) {
               // The bridge's duplicate id makes the PostOffice route the notice in a transaction of its own.
               routing.addOperation(new TransactionOperationAbstract() {
                  @Override
                  public void afterCommit(Transaction tx) {
                     recordDurable(noticed, notice, System.currentTimeMillis());
                  }
               });
            }
         }
         return;
      }
      if (address == null || message.isLargeMessage() || identityPrefixes.stream().noneMatch(address::startsWith)) {
         return;
      }
      if (message.getObjectProperty(ORIGIN) == null && message.getObjectProperty(SOURCE_ID) == null) {
         message.putLongProperty(SOURCE_ID, message.getMessageID());
         message.reencode();
      }
      String identity = delayed(address) == null ? null : identity(message);
      if (identity != null) {
         localIds.put(identity, message.getMessageID());
      }
   }

   /** A message's identity across datacentres: where it was produced and its id there; null without one. */
   private String identity(Message message) {
      Object origin = message.getObjectProperty(ORIGIN);
      Object sourceId = message.getObjectProperty(SOURCE_ID);
      return sourceId instanceof Number id ? identity(origin == null ? datacentre : origin.toString(), id.longValue())
                                            : null;
   }

   private static String identity(String origin, long sourceId) {
      return origin + ":" + sourceId;
   }

   /** A consumer acknowledged a message of a group active everywhere: tell the other datacentres. */
   @Override
   public void messageAcknowledged(Transaction tx, MessageReference reference, AckReason reason,
                                   ServerConsumer consumer) {
      Message message = reference.getMessage();
      Delayed group = delayed(message.getAddress());
      if (group != null) {
         String identity = identity(message);
         if (identity != null) {
            localIds.remove(identity);
         }
      }
      if (reason != AckReason.NORMAL || consumer == null) {
         return;
      }
      Object sourceId = message.getObjectProperty(SOURCE_ID);
      if (group == null || !(sourceId instanceof Number id)) {
         return;
      }
      Object origin = message.getObjectProperty(ORIGIN);
      Object producedAt = message.getObjectProperty(PRODUCED_AT);
      String queue = reference.getQueue().getName().toString();
      long ackedAt = System.currentTimeMillis();
      notices.execute(() -> sendNotice(group, origin == null ? datacentre : origin.toString(), id.longValue(), queue,
                                       producedAt instanceof Number at ? at.longValue() : -1L, ackedAt));
   }

   private void sendNotice(Delayed group, String origin, long sourceId, String queue, long producedAt, long ackedAt) {
      try {
         SimpleString address = SimpleString.of(group.noticeAddress());
         ensureNoticeAddress(address);
         CoreMessage notice = new CoreMessage(server.getStorageManager().generateID(), 256);
         notice.setAddress(address);
         notice.setRoutingType(RoutingType.MULTICAST);
         notice.setDurable(true);
         notice.putStringProperty(NOTICE_ORIGIN, origin);
         notice.putLongProperty(NOTICE_SOURCE_ID, sourceId);
         notice.putStringProperty(NOTICE_QUEUE, queue);
         notice.putLongProperty(NOTICE_PRODUCED_AT, producedAt);
         notice.putLongProperty(NOTICE_ACKED_AT, ackedAt);
         server.getPostOffice().route(notice, false);
      } catch (Exception e) {
         LOG.warn("continuity: no notice sent for the acknowledgement of {}:{} on {}: {}", origin, sourceId, queue,
                  e.toString());
      }
   }

   private void ensureNoticeAddress(SimpleString address) throws Exception {
      if (server.getAddressInfo(address) == null) {
         server.addAddressInfo(new AddressInfo(address, RoutingType.MULTICAST));
      }
   }

   private void recordDurable(Delayed group, Notice notice, long committedAt) {
      MeterRegistry registry = server.getMetricsManager() == null ? null : server.getMetricsManager().getMeterRegistry();
      if (registry != null && notice.producedAt() != null && notice.producedAt() > 0) {
         Timer.builder("continuity.ack.notice.durable.delta")
            .description("From a message's production to the journal commit here of its acknowledgement's notice")
            .tags("group", group.group(), "source", notice.sender())
            .register(registry).record(Math.max(0, committedAt - notice.producedAt()), TimeUnit.MILLISECONDS);
      }
   }

   /** A notice from another datacentre: remove the copy (or the original) it names, if not delivered yet. */
   private void applyNotice(Delayed group, Notice notice, int attempt) {
      String origin = notice.origin();
      Long sourceId = notice.sourceId();
      String queueName = notice.queue();
      if (origin == null || sourceId == null || queueName == null) {
         LOG.warn("continuity: a notice from {} without a message's origin, identity or queue was ignored",
                  notice.sender());
         return;
      }
      MeterRegistry registry = server.getMetricsManager() == null ? null : server.getMetricsManager().getMeterRegistry();
      if (attempt == 0 && registry != null && notice.producedAt() != null && notice.producedAt() > 0) {
         Timer.builder("continuity.ack.notice.delta")
            .description("From a message's production to the arrival here of its acknowledgement's notice")
            .tags("group", group.group(), "source", notice.sender()).publishPercentileHistogram()
            .register(registry).record(Math.max(0, notice.arrivedAt() - notice.producedAt()), TimeUnit.MILLISECONDS);
      }
      String identity = identity(origin, sourceId);
      boolean removed = false;
      try {
         Queue queue = server.locateQueue(queueName);
         Long messageId = localIds.get(identity);
         if (queue != null && messageId != null) {
            removed = queue.deleteReference(messageId);
            if (!removed && attempt < NOTICE_ATTEMPTS) {
               // Routed here and neither acknowledged nor removed since: its reference joins the queue once its
               // journal write completes (the notice can follow the copy that closely), or a consumer holds it.
               server.getScheduledPool().schedule(() -> notices.execute(() -> applyNotice(group, notice, attempt + 1)),
                                                  NOTICE_RETRY_MILLIS, TimeUnit.MILLISECONDS);
               return;
            }
            localIds.remove(identity);
         } else if (queue != null) {
            // Not indexed: acknowledged here already (then this finds nothing), or routed before a restart.
            String selector = (datacentre.equals(origin) ? ORIGIN + " IS NULL"
                               : ORIGIN + " = '" + origin.replace("'", "''") + "'")
               + " AND " + SOURCE_ID + " = " + sourceId;
            removed = queue.deleteMatchingReferences(FilterImpl.createFilter(selector)) > 0;
         }
      } catch (Exception e) {
         LOG.warn("continuity: the notice of {} on {} could not be applied: {}", identity, queueName, e.toString());
      }
      if (registry != null) {
         Counter.builder(removed ? "continuity.ack.notices.applied" : "continuity.ack.notices.late")
            .description(removed ? "Notices that removed the copy they name before its delivery"
                         : "Notices that found their copy delivered already (a duplicate) or gone")
            .tags("group", group.group(), "source", notice.sender()).register(registry).increment();
      }
   }

   @Override
   public void registered(ActiveMQServer server) {
      this.server = server;
      this.notices = server.getExecutorFactory().getExecutor();
      server.getRemotingService().addIncomingInterceptor(interceptor);
   }

   @Override
   public void unregistered(ActiveMQServer server) {
      server.getRemotingService().removeIncomingInterceptor(interceptor);
   }

   private boolean intercept(Packet packet, RemotingConnection connection) {
      if (!(packet instanceof MessagePacketI send) || !isPeer(connection)) {
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
      if (noticeGroup(target.toString()) != null) {
         // A notice is applied while it is routed and kept nowhere: its address has no queue.
         ensureNoticeAddressQuietly(target);
         message.setRoutingType(RoutingType.MULTICAST);
      } else {
         message.setRoutingType(routingType(message, target));
         Delayed group = delayed(target.toString());
         if (group != null) {
            Object producedAt = message.getObjectProperty(PRODUCED_AT);
            long from = producedAt instanceof Number at ? at.longValue() : System.currentTimeMillis();
            message.setScheduledDeliveryTime(from + group.delayMillis());
         }
      }
      message.reencode();
      return true;
   }

   private void ensureNoticeAddressQuietly(SimpleString address) {
      try {
         ensureNoticeAddress(address);
      } catch (Exception e) {
         LOG.warn("continuity: the notice address {} could not be created: {}", address, e.toString());
      }
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
