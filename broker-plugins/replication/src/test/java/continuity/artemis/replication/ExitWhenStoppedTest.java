package continuity.artemis.replication;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.function.BooleanSupplier;

import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ActiveMQServers;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** One broker in this JVM with the plugin, whose halt is recorded instead of done. */
class ExitWhenStoppedTest {
   private static final long AFTER_MS = 300;
   private final List<Integer> halts = new CopyOnWriteArrayList<>();
   private ActiveMQServer server;

   private ActiveMQServer start() throws Exception {
      ExitWhenStopped plugin = new ExitWhenStopped(halts::add);
      plugin.init(Map.of("after-ms", String.valueOf(AFTER_MS)));
      Configuration configuration = new ConfigurationImpl().setPersistenceEnabled(false).setSecurityEnabled(false)
         .addAcceptorConfiguration("in-vm", "vm://0");
      configuration.registerBrokerPlugin(plugin);
      server = ActiveMQServers.newActiveMQServer(configuration, false);
      server.start();
      return server;
   }

   @AfterEach
   void stop() throws Exception {
      if (server != null) {
         server.stop();
      }
   }

   @Test
   void aBrokerStillStoppedAfterTheGraceHaltsItsJvm() throws Exception {
      // stop(): as Artemis stops a primary that lost its lock (the callback's shutdown).
      start().stop();
      Thread.sleep(AFTER_MS / 2);
      assertEquals(List.of(), halts, "halted before after-ms");
      waitFor(() -> !halts.isEmpty(), 10 * AFTER_MS);
      Thread.sleep(2 * AFTER_MS);
      assertEquals(List.of(ExitWhenStopped.EXIT_STATUS), halts);
   }

   @Test
   void aBrokerStartedAgainInItsJvmIsLeftRunning() throws Exception {
      // As a primary that goes on as a backup: stopped (not as an exit: the callback's stop, not its shutdown), then
      // started again by Artemis.
      start().stop(false, false);
      server.start();
      Thread.sleep(4 * AFTER_MS);
      assertTrue(server.isStarted());
      assertEquals(List.of(), halts);
   }

   @Test
   void aStopAfterARestartIsGivenItsWholeGrace() throws Exception {
      start().stop();
      server.start();
      Thread.sleep(AFTER_MS / 2);
      server.stop();
      // The first stop's watch ends now, and must leave the second stop its own after-ms.
      Thread.sleep(AFTER_MS * 3 / 4);
      assertEquals(List.of(), halts);
      waitFor(() -> !halts.isEmpty(), 10 * AFTER_MS);
      assertEquals(1, halts.size());
   }

   @Test
   void theThreadsThatKeepTheJvmUpAreNamed() throws Exception {
      CountDownLatch release = new CountDownLatch(1);
      Thread lingering = waitingFor(release, "left-behind-by-a-stop");
      Thread daemon = waitingFor(release, "a-daemon");
      daemon.setDaemon(true);
      lingering.start();
      daemon.start();
      try {
         List<String> names = ExitWhenStopped.threadsKeepingTheJvmUp().stream().map(Thread::getName).toList();
         assertTrue(names.contains("left-behind-by-a-stop"), names.toString());
         assertFalse(names.contains("a-daemon"), names.toString());
      } finally {
         release.countDown();
         lingering.join();
      }
   }

   @Test
   void aGraceThatIsNotPositiveIsRefused() {
      assertThrows(IllegalArgumentException.class, () -> new ExitWhenStopped(halts::add).init(Map.of("after-ms", "0")));
   }

   private static Thread waitingFor(CountDownLatch release, String name) {
      return new Thread(() -> {
         try {
            release.await();
         } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
         }
      }, name);
   }

   private static void waitFor(BooleanSupplier condition, long timeoutMs) throws Exception {
      long deadline = System.currentTimeMillis() + timeoutMs;
      while (!condition.getAsBoolean() && System.currentTimeMillis() < deadline) {
         Thread.sleep(20);
      }
      assertTrue(condition.getAsBoolean(), "not within " + timeoutMs + " ms");
   }
}
