package continuity.artemis.replication;

import java.util.Map;
import java.util.function.BooleanSupplier;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.MetricsConfiguration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ActiveMQServers;
import org.apache.activemq.artemis.core.server.impl.AddressInfo;
import org.apache.activemq.artemis.core.server.metrics.plugins.SimpleMetricsPlugin;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static continuity.artemis.replication.EstateProperties.NOTICE_ORIGIN;
import static continuity.artemis.replication.EstateProperties.NOTICE_QUEUE;
import static continuity.artemis.replication.EstateProperties.NOTICE_SOURCE_ID;
import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.PRODUCED_AT;
import static continuity.artemis.replication.EstateProperties.SOURCE_ID;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The plugin on a real broker in this JVM (in-VM acceptor, no persistence), datacentre dc1, books active everywhere. */
class AckNoticesTest {
   private static final String QUEUE = "books.orders";
   private static final String NOTICES = "continuity.notice.books";
   private ActiveMQServer server;
   private ServerLocator locator;
   private ClientSessionFactory factory;
   private ClientSession session;

   @BeforeEach
   void start() throws Exception {
      InboundCopies plugin = new InboundCopies();
      plugin.init(Map.of("inbound-prefix", "continuity.inbound.", "peer-role", "peer", "identity-prefixes", "books.",
                         "staging-delay.books.", "60000 books", "notice-prefix", "continuity.notice.",
                         "datacentre", "dc1"));
      Configuration configuration = new ConfigurationImpl().setPersistenceEnabled(false).setSecurityEnabled(false)
         .addAcceptorConfiguration("in-vm", "vm://0")
         .setMetricsConfiguration(new MetricsConfiguration().setPlugin(new SimpleMetricsPlugin().init(Map.of())));
      configuration.registerBrokerPlugin(plugin);
      server = ActiveMQServers.newActiveMQServer(configuration, false);
      server.start();
      server.createQueue(QueueConfiguration.of(QUEUE).setRoutingType(RoutingType.ANYCAST));
      server.addAddressInfo(new AddressInfo(SimpleString.of(NOTICES), RoutingType.MULTICAST));
      locator = ActiveMQClient.createServerLocator("vm://0");
      factory = locator.createSessionFactory();
      session = factory.createSession();
      session.start();
   }

   @AfterEach
   void stop() throws Exception {
      session.close();
      factory.close();
      locator.close();
      server.stop();
   }

   private void send(ClientMessage message) throws Exception {
      try (ClientProducer producer = session.createProducer(QUEUE)) {
         producer.send(message);
      }
   }

   private ClientMessage receive(String queue) throws Exception {
      try (ClientConsumer consumer = session.createConsumer(queue)) {
         ClientMessage message = consumer.receive(5_000);
         assertNotNull(message, "nothing on " + queue);
         message.acknowledge();
         return message;
      }
   }

   /** A notice as another datacentre's bridge would deliver it, routed as the broker routes an arriving copy. */
   private void noticeFrom(String sender, String origin, long sourceId) throws Exception {
      CoreMessage notice = new CoreMessage(server.getStorageManager().generateID(), 256);
      notice.setAddress(NOTICES);
      notice.setRoutingType(RoutingType.MULTICAST);
      notice.putStringProperty(ORIGIN, sender);
      notice.putStringProperty(NOTICE_ORIGIN, origin);
      notice.putLongProperty(NOTICE_SOURCE_ID, sourceId);
      notice.putStringProperty(NOTICE_QUEUE, QUEUE);
      server.getPostOffice().route(notice, false);
   }

   private double counted(String name, String source) {
      MeterRegistry registry = server.getMetricsManager().getMeterRegistry();
      Counter counter = registry.find(name).tags("group", "books", "source", source).counter();
      return counter == null ? 0 : counter.count();
   }

   private static void waitFor(String what, BooleanSupplier condition) throws InterruptedException {
      for (int attempt = 0; attempt < 500 && !condition.getAsBoolean(); attempt++) {
         Thread.sleep(10);
      }
      assertTrue(condition.getAsBoolean(), what);
   }

   @Test
   void a_clients_forged_stamps_are_dropped_and_the_message_gets_its_own_identity_and_production_time()
         throws Exception {
      ClientMessage forged = session.createMessage(true);
      forged.putStringProperty(ORIGIN, "dc9");
      forged.putLongProperty(SOURCE_ID, 1L);
      forged.putLongProperty(PRODUCED_AT, 1L);
      send(forged);

      ClientMessage received = receive(QUEUE);

      assertNull(received.getObjectProperty(ORIGIN));
      assertNotEquals(1L, received.getLongProperty(SOURCE_ID));
      assertTrue(received.getLongProperty(PRODUCED_AT) > 1L);
   }

   @Test
   void a_consumers_acknowledgement_becomes_a_notice_naming_the_message_and_its_queue() throws Exception {
      server.createQueue(QueueConfiguration.of("outbound.dc2").setAddress(NOTICES)
                            .setRoutingType(RoutingType.MULTICAST));
      send(session.createMessage(true));

      long sourceId = receive(QUEUE).getLongProperty(SOURCE_ID);
      ClientMessage notice = receive("outbound.dc2");

      assertEquals("dc1", notice.getStringProperty(NOTICE_ORIGIN));
      assertEquals(sourceId, notice.getLongProperty(NOTICE_SOURCE_ID));
      assertEquals(QUEUE, notice.getStringProperty(NOTICE_QUEUE));
   }

   @Test
   void a_notice_from_another_datacentre_removes_the_message_it_names_before_its_delivery_and_is_counted()
         throws Exception {
      send(session.createMessage(true));
      send(session.createMessage(true));
      long sourceId = server.locateQueue(QUEUE).browserIterator().next().getMessage().getLongProperty(SOURCE_ID);

      noticeFrom("dc2", "dc1", sourceId);

      waitFor("the notice counted", () -> counted(NoticeMetrics.APPLIED, "dc2") == 1);
      assertEquals(1, server.locateQueue(QUEUE).getMessageCount());
      assertNotEquals(sourceId, receive(QUEUE).getLongProperty(SOURCE_ID));
   }

   @Test
   void a_notice_for_a_message_delivered_here_already_removes_nothing_and_is_counted_late() throws Exception {
      send(session.createMessage(true));
      long sourceId = receive(QUEUE).getLongProperty(SOURCE_ID);
      send(session.createMessage(true));

      noticeFrom("dc2", "dc1", sourceId);

      waitFor("the late notice counted", () -> counted(NoticeMetrics.LATE, "dc2") == 1);
      assertEquals(0, counted(NoticeMetrics.APPLIED, "dc2"));
      assertEquals(1, server.locateQueue(QUEUE).getMessageCount());
   }
}
