package continuity.artemis.replication;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.filter.impl.FilterImpl;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.Queue;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.TransactionOperationAbstract;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import static continuity.artemis.replication.EstateProperties.NOTICE_ACKED_AT;
import static continuity.artemis.replication.EstateProperties.NOTICE_ORIGIN;
import static continuity.artemis.replication.EstateProperties.NOTICE_PRODUCED_AT;
import static continuity.artemis.replication.EstateProperties.NOTICE_QUEUE;
import static continuity.artemis.replication.EstateProperties.NOTICE_SOURCE_ID;
import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.PRODUCED_AT;
import static continuity.artemis.replication.EstateProperties.SOURCE_ID;

/**
 * A consumer's acknowledgement of a message of a group active everywhere (not an expiry, not a removal) becomes a
 * notice to <notice-prefix><group>, which the group's diverts put into the outbound queues behind the copies; at each
 * other datacentre the notice removes the copy it names from the same queue, or the original where the message was
 * produced. A notice that finds nothing came too late: the copy was delivered. Notices are sent and applied in order,
 * away from the acknowledging and the routing thread.
 */
final class AckNotices {
   // How long a notice waits, at most, for the copy it names to join its queue or be acknowledged: 2 s.
   static final int ATTEMPTS = 200;
   static final long RETRY_MILLIS = 10;
   private static final Logger LOG = LoggerFactory.getLogger(AckNotices.class);

   /** A notice as it arrived from the datacentre {@code sender}. */
   record Notice(String sender, String origin, Long sourceId, String queue, Long producedAt, long arrivedAt) {
      /** A field a notice lacks is null (Message.getLongProperty would throw for it on the routing thread). */
      static Notice of(Message message, long arrivedAt) {
         return new Notice(String.valueOf(message.getObjectProperty(ORIGIN)), text(message, NOTICE_ORIGIN),
                           number(message, NOTICE_SOURCE_ID), text(message, NOTICE_QUEUE),
                           number(message, NOTICE_PRODUCED_AT), arrivedAt);
      }

      private static String text(Message message, SimpleString property) {
         Object value = message.getObjectProperty(property);
         return value == null ? null : value.toString();
      }

      private static Long number(Message message, SimpleString property) {
         return message.getObjectProperty(property) instanceof Number value ? value.longValue() : null;
      }
   }

   private final ActiveMQServer server;
   private final Executor executor;
   private final IdentityStamping identities;
   private final String datacentre;
   private final NoticeMetrics metrics;
   // The local message id of each message of a delayed group here, by its identity across datacentres, until it is
   // acknowledged or removed: a notice then removes it by id (a filter would read every message of the queue).
   private final Map<String, Long> localIds = new ConcurrentHashMap<>();

   AckNotices(ActiveMQServer server, IdentityStamping identities, String datacentre, NoticeMetrics metrics) {
      this.server = server;
      this.executor = server.getExecutorFactory().getExecutor();
      this.identities = identities;
      this.datacentre = datacentre;
      this.metrics = metrics;
   }

   /** A message of a delayed group routed here (an original or a copy): a notice may remove it later. */
   void routed(Message message) {
      String identity = identities.identity(message);
      if (identity != null) {
         localIds.put(identity, message.getMessageID());
      }
   }

   /** A message of a delayed group left its queue; a consumer's acknowledgement is told to the other datacentres. */
   void acknowledged(StagingDelays.Group group, Message message, String queue, boolean byConsumer) {
      String identity = identities.identity(message);
      if (identity != null) {
         localIds.remove(identity);
      }
      Object sourceId = message.getObjectProperty(SOURCE_ID);
      if (!byConsumer || !(sourceId instanceof Number id)) {
         return;
      }
      Object origin = message.getObjectProperty(ORIGIN);
      Object producedAt = message.getObjectProperty(PRODUCED_AT);
      long ackedAt = System.currentTimeMillis();
      executor.execute(() -> send(group, origin == null ? datacentre : origin.toString(), id.longValue(), queue,
                                  producedAt instanceof Number at ? at.longValue() : -1L, ackedAt));
   }

   /** A notice from another datacentre being routed here (it is kept nowhere: its address has no queue). */
   void arrived(StagingDelays.Group group, Message message, Transaction routing) {
      if (message.getObjectProperty(ORIGIN) == null) {
         return;
      }
      Notice notice = Notice.of(message, System.currentTimeMillis());
      executor.execute(() -> apply(group, notice, 0));
      if (routing != null) {
         // The bridge's duplicate id makes the PostOffice route the notice in a transaction of its own.
         routing.addOperation(new TransactionOperationAbstract() {
            @Override
            public void afterCommit(Transaction tx) {
               metrics.durable(group.name(), notice.sender(), notice.producedAt(), System.currentTimeMillis());
            }
         });
      }
   }

   private void send(StagingDelays.Group group, String origin, long sourceId, String queue, long producedAt,
                     long ackedAt) {
      try {
         SimpleString address = SimpleString.of(group.noticeAddress());
         ensureAddress(address);
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

   /** The notice address, created multicast when a copy or an acknowledgement needs it first. */
   void ensureAddress(SimpleString address) throws Exception {
      if (server.getAddressInfo(address) == null) {
         server.addAddressInfo(new AddressInfo(address, RoutingType.MULTICAST));
      }
   }

   /** Removes the copy (or the original) the notice names, if not delivered yet. */
   private void apply(StagingDelays.Group group, Notice notice, int attempt) {
      String origin = notice.origin();
      Long sourceId = notice.sourceId();
      String queueName = notice.queue();
      if (origin == null || sourceId == null || queueName == null) {
         LOG.warn("continuity: a notice from {} without a message's origin, identity or queue was ignored",
                  notice.sender());
         return;
      }
      if (attempt == 0) {
         metrics.arrived(group.name(), notice.sender(), notice.producedAt(), notice.arrivedAt());
      }
      String identity = IdentityStamping.identity(origin, sourceId);
      boolean removed = false;
      try {
         Queue queue = server.locateQueue(queueName);
         Long messageId = localIds.get(identity);
         if (queue != null && messageId != null) {
            removed = queue.deleteReference(messageId);
            if (!removed && attempt < ATTEMPTS) {
               // Routed here and neither acknowledged nor removed since: its reference joins the queue once its
               // journal write completes (the notice can follow the copy that closely), or a consumer holds it.
               server.getScheduledPool().schedule(() -> executor.execute(() -> apply(group, notice, attempt + 1)),
                                                  RETRY_MILLIS, TimeUnit.MILLISECONDS);
               return;
            }
            localIds.remove(identity);
         } else if (queue != null) {
            // Not indexed: acknowledged here already (then this finds nothing), or routed before a restart.
            removed = queue.deleteMatchingReferences(FilterImpl.createFilter(selector(origin, sourceId))) > 0;
         }
      } catch (Exception e) {
         LOG.warn("continuity: the notice of {} on {} could not be applied: {}", identity, queueName, e.toString());
      }
      metrics.applied(group.name(), notice.sender(), removed);
   }

   /** A filter for the message produced at origin with the id sourceId there. */
   String selector(String origin, long sourceId) {
      return (datacentre.equals(origin) ? ORIGIN + " IS NULL" : ORIGIN + " = '" + origin.replace("'", "''") + "'")
         + " AND " + SOURCE_ID + " = " + sourceId;
   }
}
