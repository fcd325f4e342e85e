package continuity.artemis.replication;

import java.util.List;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.SimpleString;

/**
 * The message properties only the estate stamps. A client's message loses them before it is routed (a copy from
 * another datacentre's broker keeps them), so nothing a client sends decides what replication does with a message.
 */
final class EstateProperties {
   /** A message's id at the datacentre it was produced at: its identity across datacentres, with its origin. */
   static final SimpleString SOURCE_ID = SimpleString.of("continuity_source_id");
   /** Set on a copy only: the datacentre the message was produced at. */
   static final SimpleString ORIGIN = SimpleString.of("continuity_origin");
   /** When an original of a group active everywhere was produced (ms). */
   static final SimpleString PRODUCED_AT = SimpleString.of("continuity_produced_at");
   // A notice: which message (where it was produced, its identity there), on which queue, when it was produced and
   // acknowledged.
   static final SimpleString NOTICE_ORIGIN = SimpleString.of("continuity_notice_origin");
   static final SimpleString NOTICE_SOURCE_ID = SimpleString.of("continuity_notice_source_id");
   static final SimpleString NOTICE_QUEUE = SimpleString.of("continuity_notice_queue");
   static final SimpleString NOTICE_PRODUCED_AT = SimpleString.of("continuity_notice_produced_at");
   static final SimpleString NOTICE_ACKED_AT = SimpleString.of("continuity_notice_acked_at");
   static final List<SimpleString> ALL = List.of(SOURCE_ID, ORIGIN, PRODUCED_AT, NOTICE_ORIGIN, NOTICE_SOURCE_ID,
                                                 NOTICE_QUEUE, NOTICE_PRODUCED_AT, NOTICE_ACKED_AT);

   private EstateProperties() {
   }

   /** Removes from a client's message what only the estate stamps; true if it had any. */
   static boolean strip(Message message) {
      boolean stripped = false;
      for (SimpleString property : ALL) {
         stripped |= message.removeProperty(property) != null;
      }
      if (stripped) {
         message.reencode();
      }
      return stripped;
   }
}
