/*
 * A broker that stopped itself ends its process, so that its service manager starts it again.
 *
 * Artemis stops a broker of an HA pair inside its JVM when the pair's lock is lost (a primary stalled past its
 * ZooKeeper session) and counts on the JVM ending with it, for the unit's Restart=always to start it again as the
 * backup of the broker that took over. A thread that outlives the stop keeps the JVM up with no broker in it, and the
 * service manager sees it running: chaos 2 x 2 seed 5 at 30d2af6, a primary stalled while it sent its journal to its
 * restarted backup stopped for its lost lock and answered nothing for the last 19 minutes of the run.
 *
 * When the broker is still stopped after-ms after its stop (not started again in the same JVM, as a primary that
 * goes on as a backup is), this logs the threads still running, with their stacks, and halts the JVM with
 * EXIT_STATUS. A stop asked for (systemctl stop, artemis stop) ends the JVM long before.
 *
 * Options (a <property> of <broker-plugin> in broker.xml): after-ms (default 30000).
 */
package continuity.artemis.replication;

import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntConsumer;

import org.apache.activemq.artemis.core.server.ActivateCallback;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class ExitWhenStopped implements ActiveMQServerPlugin {
   private static final Logger LOG = LoggerFactory.getLogger(ExitWhenStopped.class);
   static final int EXIT_STATUS = 1;
   static final long DEFAULT_AFTER_MS = 30_000;

   private final IntConsumer halt;
   private final AtomicLong stops = new AtomicLong();
   private long afterMs = DEFAULT_AFTER_MS;

   public ExitWhenStopped() {
      this(status -> Runtime.getRuntime().halt(status));
   }

   ExitWhenStopped(IntConsumer halt) {
      this.halt = halt;
   }

   @Override
   public void init(Map<String, String> properties) {
      String value = properties.get("after-ms");
      if (value != null) {
         afterMs = Long.parseLong(value.trim());
         if (afterMs <= 0) {
            throw new IllegalArgumentException("ExitWhenStopped: after-ms must be positive, not " + value);
         }
      }
   }

   @Override
   public void registered(ActiveMQServer server) {
      // Called again each time the broker starts in its JVM; the callbacks are a set, so this one is there once.
      server.registerActivateCallback(onStop);
   }

   @Override
   public void unregistered(ActiveMQServer server) {
      server.unregisterActivateCallback(onStop);
   }

   /** Artemis calls stop or shutdown as the last step of stopping the broker (shutdown for a lost lock too). */
   private final ActivateCallback onStop = new ActivateCallback() {
      @Override
      public void stop(ActiveMQServer server) {
         stopped(server);
      }

      @Override
      public void shutdown(ActiveMQServer server) {
         stopped(server);
      }
   };

   private void stopped(ActiveMQServer server) {
      long stop = stops.incrementAndGet();
      Thread watch = new Thread(() -> watch(server, stop), "continuity-exit-when-stopped");
      watch.setDaemon(true);
      watch.start();
   }

   private void watch(ActiveMQServer server, long stop) {
      try {
         Thread.sleep(afterMs);
      } catch (InterruptedException e) {
         Thread.currentThread().interrupt();
         return;
      }
      // Started again since (and perhaps stopped again: that stop's own watch decides).
      if (stop != stops.get() || server.getState() != ActiveMQServer.SERVER_STATE.STOPPED) {
         return;
      }
      List<Thread> keeping = threadsKeepingTheJvmUp();
      LOG.error("continuity: the broker stopped {} ms ago and its JVM did not end: {} thread(s) keep it up ({}); "
                   + "halting it with status {} for its service manager to start it again", afterMs, keeping.size(),
                keeping.stream().map(Thread::getName).toList(), EXIT_STATUS);
      for (Thread thread : keeping) {
         StringBuilder stack = new StringBuilder();
         for (StackTraceElement frame : thread.getStackTrace()) {
            stack.append("\n\tat ").append(frame);
         }
         LOG.error("continuity: thread \"{}\" ({}){}", thread.getName(), thread.getState(), stack);
      }
      halt.accept(EXIT_STATUS);
   }

   /** The live threads that are not daemons (the JVM ends when none is left), but for this one. */
   static List<Thread> threadsKeepingTheJvmUp() {
      return Thread.getAllStackTraces().keySet().stream()
         .filter(thread -> thread.isAlive() && !thread.isDaemon() && thread != Thread.currentThread())
         .filter(thread -> !"DestroyJavaVM".equals(thread.getName()))
         .toList();
   }
}
