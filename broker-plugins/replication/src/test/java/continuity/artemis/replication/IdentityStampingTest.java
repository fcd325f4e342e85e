package continuity.artemis.replication;

import java.util.List;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.junit.jupiter.api.Test;

import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.SOURCE_ID;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class IdentityStampingTest {
   private final IdentityStamping stamping = new IdentityStamping(List.of("books.", "orders."), "dc1");

   static CoreMessage message(long id, String address) {
      CoreMessage message = new CoreMessage(id, 256);
      message.setAddress(address);
      return message;
   }

   @Test
   void a_clients_message_loses_every_property_only_the_estate_stamps_and_keeps_its_own() {
      CoreMessage message = message(1, "books.x");
      for (SimpleString property : EstateProperties.ALL) {
         message.putStringProperty(property, "forged");
      }
      message.putStringProperty("customer", "kept");

      assertTrue(EstateProperties.strip(message));

      for (SimpleString property : EstateProperties.ALL) {
         assertNull(message.getObjectProperty(property), property.toString());
      }
      assertEquals("kept", message.getStringProperty("customer"));
      assertFalse(EstateProperties.strip(message));
   }

   @Test
   void an_original_under_an_identity_prefix_takes_its_own_message_id_as_its_identity() {
      CoreMessage original = message(42, "books.x");

      stamping.stampOriginal(original);

      assertEquals(42L, original.getLongProperty(SOURCE_ID));
      assertEquals("dc1:42", stamping.identity(original));
   }

   @Test
   void a_message_elsewhere_a_copy_and_a_message_stamped_before_keep_what_they_have() {
      CoreMessage elsewhere = message(1, "inventory.x");
      CoreMessage copy = message(2, "books.x");
      copy.putStringProperty(ORIGIN, "dc2");
      CoreMessage moved = message(3, "orders.x");
      moved.putLongProperty(SOURCE_ID, 7L);

      for (Message message : List.of(elsewhere, copy, moved)) {
         stamping.stampOriginal(message);
      }

      assertNull(elsewhere.getObjectProperty(SOURCE_ID));
      assertNull(copy.getObjectProperty(SOURCE_ID));
      assertNull(stamping.identity(copy));
      assertEquals(7L, moved.getLongProperty(SOURCE_ID));
      assertEquals("dc1:7", stamping.identity(moved));
   }

   @Test
   void a_copy_takes_the_id_of_its_original_at_its_source_unless_it_has_an_identity_already() {
      CoreMessage copy = message(99, "continuity.inbound.dc1");
      copy.setBrokerProperty(Message.HDR_ORIG_MESSAGE_ID, 42L);
      copy.putStringProperty(ORIGIN, "dc2");
      CoreMessage stamped = message(98, "continuity.inbound.dc1");
      stamped.setBrokerProperty(Message.HDR_ORIG_MESSAGE_ID, 42L);
      stamped.putLongProperty(SOURCE_ID, 5L);

      IdentityStamping.stampCopy(copy);
      IdentityStamping.stampCopy(stamped);

      assertEquals(42L, copy.getLongProperty(SOURCE_ID));
      assertEquals("dc2:42", stamping.identity(copy));
      assertEquals(5L, stamped.getLongProperty(SOURCE_ID));
   }
}
