package continuity.artemis.replication;

import java.util.concurrent.TimeUnit;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

class NoticeMetricsTest {
   private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
   private final NoticeMetrics metrics = new NoticeMetrics(() -> registry);

   @Test
   void the_time_from_production_to_a_notices_arrival_and_commit_is_recorded_by_group_and_source() {
      metrics.arrived("books", "dc2", 1_000L, 1_250L);
      metrics.durable("books", "dc2", 1_000L, 1_300L);

      assertEquals(250, registry.get(NoticeMetrics.ARRIVED).tags("group", "books", "source", "dc2").timer()
         .totalTime(TimeUnit.MILLISECONDS), 0.001);
      assertEquals(300, registry.get(NoticeMetrics.DURABLE).tags("group", "books", "source", "dc2").timer()
         .totalTime(TimeUnit.MILLISECONDS), 0.001);
   }

   @Test
   void a_notice_without_a_production_time_records_no_time() {
      metrics.arrived("books", "dc2", null, 1_250L);
      metrics.arrived("books", "dc2", -1L, 1_250L);

      assertNull(registry.find(NoticeMetrics.ARRIVED).timer());
   }

   @Test
   void notices_in_time_and_too_late_are_counted_apart() {
      metrics.applied("books", "dc2", true);
      metrics.applied("books", "dc2", true);
      metrics.applied("books", "dc3", false);

      assertEquals(2, registry.get(NoticeMetrics.APPLIED).tags("source", "dc2").counter().count());
      assertEquals(1, registry.get(NoticeMetrics.LATE).tags("source", "dc3").counter().count());
   }

   @Test
   void a_broker_whose_metrics_are_off_records_nothing_and_fails_nothing() {
      NoticeMetrics off = new NoticeMetrics(() -> null);

      assertDoesNotThrow(() -> {
         off.arrived("books", "dc2", 1_000L, 1_250L);
         off.durable("books", "dc2", 1_000L, 1_300L);
         off.applied("books", "dc2", true);
      });
   }
}
