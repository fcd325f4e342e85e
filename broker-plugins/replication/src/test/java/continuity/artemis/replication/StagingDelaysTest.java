package continuity.artemis.replication;

import java.util.Map;

import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.junit.jupiter.api.Test;

import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.PRODUCED_AT;
import static continuity.artemis.replication.IdentityStampingTest.message;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class StagingDelaysTest {
   private final StagingDelays staging = StagingDelays.parse(Map.of(
      "staging-delay.books.", "500 books", "notice-prefix", "continuity.notice.", "inbound-prefix", "in."));

   @Test
   void each_prefix_names_its_group_its_delay_and_the_address_of_its_notices() {
      StagingDelays.Group books = staging.of("books.orders");

      assertEquals(new StagingDelays.Group("books", 500, "continuity.notice.books"), books);
      assertNull(staging.of("inventory.orders"));
      assertNull(staging.of(null));
      assertEquals(books, staging.noticedAt("continuity.notice.books"));
      assertNull(staging.noticedAt("continuity.notice.other"));
   }

   @Test
   void no_options_no_delayed_group() {
      assertTrue(StagingDelays.parse(Map.of("inbound-prefix", "in.")).isEmpty());
   }

   @Test
   void an_option_that_is_not_a_delay_and_a_group_beside_a_notice_prefix_is_refused_by_name() {
      for (Map<String, String> options : new Map[] {
            Map.of("staging-delay.books.", "500 books"),
            Map.of("staging-delay.books.", "books", "notice-prefix", "n."),
            Map.of("staging-delay.books.", "soon books", "notice-prefix", "n.")}) {
         IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                                                         () -> StagingDelays.parse(options));
         assertTrue(refused.getMessage().contains("staging-delay.books."), refused.getMessage());
      }
   }

   @Test
   void an_original_of_a_delayed_group_is_stamped_with_its_production_time_once() {
      CoreMessage original = message(1, "books.orders");

      staging.stampProduction(original, 1_000);
      staging.stampProduction(original, 2_000);

      assertEquals(1_000L, original.getLongProperty(PRODUCED_AT));
   }

   @Test
   void a_copy_and_a_message_of_another_group_get_no_production_time() {
      CoreMessage copy = message(1, "books.orders");
      copy.putStringProperty(ORIGIN, "dc2");
      CoreMessage other = message(2, "inventory.orders");

      staging.stampProduction(copy, 1_000);
      staging.stampProduction(other, 1_000);

      assertNull(copy.getObjectProperty(PRODUCED_AT));
      assertNull(other.getObjectProperty(PRODUCED_AT));
   }

   @Test
   void a_copy_is_delivered_its_delay_after_its_production_or_after_its_arrival_without_one() {
      CoreMessage stamped = message(1, "books.orders");
      stamped.putLongProperty(PRODUCED_AT, 1_000L);
      CoreMessage unstamped = message(2, "books.orders");
      CoreMessage other = message(3, "inventory.orders");

      staging.schedule(stamped, 9_000);
      staging.schedule(unstamped, 9_000);
      staging.schedule(other, 9_000);

      assertEquals(1_500L, stamped.getScheduledDeliveryTime());
      assertEquals(9_500L, unstamped.getScheduledDeliveryTime());
      assertEquals(0L, other.getScheduledDeliveryTime());
   }
}
