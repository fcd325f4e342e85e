package continuity.artemis.replication;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.SessionSendMessage;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.junit.jupiter.api.Test;

import static continuity.artemis.replication.EstateProperties.PRODUCED_AT;
import static continuity.artemis.replication.EstateProperties.SOURCE_ID;
import static continuity.artemis.replication.IdentityStampingTest.message;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class CopyForwardingTest {
   private final Map<String, AddressInfo> addresses = Map.of(
      "prices", new AddressInfo(SimpleString.of("prices"), RoutingType.MULTICAST));
   private final List<SimpleString> noticeAddresses = new ArrayList<>();
   private final CopyForwarding forwarding = new CopyForwarding(
      "continuity.inbound.",
      StagingDelays.parse(Map.of("staging-delay.books.", "500 books", "notice-prefix", "continuity.notice.")),
      name -> addresses.get(name.toString()), noticeAddresses::add);

   /** What a core bridge delivers: the divert's copy of a message sent to original, at the inbound address. */
   static CoreMessage copyOf(String original, long sourceId) {
      CoreMessage copy = message(1000 + sourceId, "continuity.inbound.dc1");
      copy.setBrokerProperty(Message.HDR_ORIGINAL_ADDRESS, SimpleString.of(original));
      copy.setBrokerProperty(Message.HDR_ORIG_MESSAGE_ID, sourceId);
      return copy;
   }

   @Test
   void a_copy_goes_on_to_the_address_it_was_diverted_from_with_its_identity_and_routing_type() {
      CoreMessage copy = copyOf("orders", 42);
      copy.setBrokerProperty(Message.HDR_ORIG_ROUTING_TYPE, RoutingType.MULTICAST.getType());

      assertTrue(forwarding.sendOn(copy));

      assertEquals("orders", copy.getAddress());
      assertEquals(RoutingType.MULTICAST, copy.getRoutingType());
      assertEquals(42L, copy.getLongProperty(SOURCE_ID));
      assertEquals(0L, copy.getScheduledDeliveryTime());
   }

   @Test
   void a_copy_without_its_routing_type_takes_the_one_the_address_here_allows() {
      CoreMessage toMulticastOnly = copyOf("prices", 1);
      CoreMessage toUnknown = copyOf("orders", 2);

      forwarding.sendOn(toMulticastOnly);
      forwarding.sendOn(toUnknown);

      assertEquals(RoutingType.MULTICAST, toMulticastOnly.getRoutingType());
      assertEquals(RoutingType.ANYCAST, toUnknown.getRoutingType());
   }

   @Test
   void a_copy_of_a_group_active_everywhere_waits_for_its_delay_after_its_production() {
      CoreMessage copy = copyOf("books.orders", 3);
      copy.putLongProperty(PRODUCED_AT, 1_000L);

      forwarding.sendOn(copy);

      assertEquals(1_500L, copy.getScheduledDeliveryTime());
   }

   @Test
   void a_notice_goes_on_to_its_multicast_address_which_is_created_if_missing() {
      CoreMessage notice = copyOf("continuity.notice.books", 4);

      forwarding.sendOn(notice);

      assertEquals("continuity.notice.books", notice.getAddress());
      assertEquals(RoutingType.MULTICAST, notice.getRoutingType());
      assertEquals(List.of(SimpleString.of("continuity.notice.books")), noticeAddresses);
   }

   @Test
   void a_message_outside_the_inbound_prefix_or_without_an_original_address_is_left_as_it_is() {
      CoreMessage elsewhere = copyOf("orders", 5);
      elsewhere.setAddress("orders.inbound");
      CoreMessage noOriginal = message(6, "continuity.inbound.dc1");

      assertFalse(forwarding.sendOn(elsewhere));
      assertFalse(forwarding.sendOn(noOriginal));

      assertEquals("orders.inbound", elsewhere.getAddress());
      assertNull(elsewhere.getObjectProperty(SOURCE_ID));
      assertEquals("continuity.inbound.dc1", noOriginal.getAddress());
   }

   @Test
   void the_copy_in_a_send_packet_is_redirected_before_the_session_reads_its_address() {
      CoreMessage copy = copyOf("orders", 7);
      SessionSendMessage packet = new SessionSendMessage(copy);

      forwarding.forward(packet);

      assertEquals("orders", packet.getMessage().getAddress());
      assertEquals(7L, packet.getMessage().getLongProperty(SOURCE_ID));
   }
}
