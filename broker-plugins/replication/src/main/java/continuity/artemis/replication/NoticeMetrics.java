package continuity.artemis.replication;

import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;

/**
 * What the notices of a group active everywhere do, on the broker's metrics (nothing when its metrics are off): the
 * time from a message's production to the arrival here of its acknowledgement's notice and to that notice's journal
 * commit here (when a subscriber could see it, and a failover no longer loses it), and the notices that removed their
 * copy in time or came too late.
 */
final class NoticeMetrics {
   static final String ARRIVED = "continuity.ack.notice.delta";
   static final String DURABLE = "continuity.ack.notice.durable.delta";
   static final String APPLIED = "continuity.ack.notices.applied";
   static final String LATE = "continuity.ack.notices.late";

   private final Supplier<MeterRegistry> registry;

   /** registry: the broker's, read at each record (null while its metrics are off). */
   NoticeMetrics(Supplier<MeterRegistry> registry) {
      this.registry = registry;
   }

   void arrived(String group, String source, Long producedAt, long arrivedAt) {
      MeterRegistry meters = registry.get();
      if (meters != null && producedAt != null && producedAt > 0) {
         Timer.builder(ARRIVED)
            .description("From a message's production to the arrival here of its acknowledgement's notice")
            .tags("group", group, "source", source).publishPercentileHistogram()
            .register(meters).record(Math.max(0, arrivedAt - producedAt), TimeUnit.MILLISECONDS);
      }
   }

   void durable(String group, String source, Long producedAt, long committedAt) {
      MeterRegistry meters = registry.get();
      if (meters != null && producedAt != null && producedAt > 0) {
         Timer.builder(DURABLE)
            .description("From a message's production to the journal commit here of its acknowledgement's notice")
            .tags("group", group, "source", source)
            .register(meters).record(Math.max(0, committedAt - producedAt), TimeUnit.MILLISECONDS);
      }
   }

   /** A notice applied: removed, the copy it names was not delivered yet; else it came too late or found nothing. */
   void applied(String group, String source, boolean removed) {
      MeterRegistry meters = registry.get();
      if (meters != null) {
         Counter.builder(removed ? APPLIED : LATE)
            .description(removed ? "Notices that removed the copy they name before its delivery"
                         : "Notices that found their copy delivered already (a duplicate) or gone")
            .tags("group", group, "source", source).register(meters).increment();
      }
   }
}
