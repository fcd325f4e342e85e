/*
 * What a broker relays survives its restart while a datacentre is cut off (docs/upstream/mirror-relay-drop.md).
 *
 * A broker relays the events another datacentre's mirror brings it on its own mirror connections to the datacentres
 * beyond. Until such a connection has connected once since the broker started, Artemis does not know the broker at
 * its other end: it takes the event's origin for it and drops the event as a reflection (AMQPMirrorControllerSource's
 * invalidTarget), so what the broker should relay to a datacentre it cannot reach at its start is lost, not stored for
 * later. This plugin keeps, in the broker's data directory, the node ID each mirror connection's remote announced
 * when it last connected, and gives it back to the connection when the broker activates, before a relayed event is
 * routed: the connection stores what it relays, and sends its remote nothing that came from there. Once the
 * connection connects, the ID its remote announces replaces the one kept (a remote whose journal was replaced has a
 * new one). A connection that never connected from this data directory (a new estate, or a replicating backup taking
 * over for the first time) keeps Artemis's behaviour.
 *
 * Artemis's mirror classes are not API: they are reached by name (MirrorSources), and a release without them leaves
 * the plugin idle, saying so once.
 */
package continuity.artemis.replication;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.RoutingContext;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class RelayIdentities implements ActiveMQServerPlugin {
   static final String FILE = "continuity-mirror-peers.properties";
   private static final Logger LOG = LoggerFactory.getLogger(RelayIdentities.class);

   private final Properties known = new Properties();
   private ActiveMQServer server;
   private Path file;
   private ScheduledExecutorService watch;
   // Every mirror connection of the active broker has been given what it can be given (checked before each relayed
   // event until then, then every second for the connections that connect).
   private volatile boolean primed;
   private boolean unusable;

   public RelayIdentities() {
   }

   /** Keeps the IDs in ``file`` (the tests'). */
   RelayIdentities(Path file) {
      this.file = file;
   }

   @Override
   public void init(Map<String, String> properties) {
      // No options: the connections and their remotes are the broker's own.
   }

   @Override
   public void registered(ActiveMQServer server) {
      this.server = server;
      file = server.getConfiguration().getJournalLocation().toPath().toAbsolutePath().getParent().resolve(FILE);
      // Registered again each time the broker starts in its JVM: one watch.
      if (watch != null) {
         watch.shutdownNow();
      }
      watch = Executors.newSingleThreadScheduledExecutor(runnable -> {
         Thread thread = new Thread(runnable, "continuity-relay-identities");
         thread.setDaemon(true);
         return thread;
      });
      watch.scheduleWithFixedDelay(this::check, 1, 1, TimeUnit.SECONDS);
   }

   @Override
   public void unregistered(ActiveMQServer server) {
      if (watch != null) {
         watch.shutdownNow();
      }
   }

   /** A relayed event (it came from another broker's mirror) finds every connection given its remote's ID. */
   @Override
   public void beforeMessageRoute(Message message, RoutingContext context, boolean direct, boolean rejectDuplicates) {
      if (!primed && context.getMirrorSource() != null) {
         check();
      }
   }

   synchronized void check() {
      if (unusable) {
         return;
      }
      if (server == null || !server.isActive()) {
         primed = false;
         return;
      }
      try {
         prime(MirrorSources.of(server.getMirrorController()));
      } catch (ReflectiveOperationException | RuntimeException e) {
         unusable = true;
         primed = true;
         LOG.warn("continuity: this Artemis release's mirror is not the one RelayIdentities knows ({}); a broker "
                     + "restarted while cut off from a datacentre may drop what it relays there", e.toString());
      }
   }

   /** Gives each connection that has not connected the ID kept for it, and keeps what the connected ones announce. */
   void prime(MirrorSources sources) {
      if (known.isEmpty() && Files.exists(file)) {
         load();
      }
      boolean learned = false;
      for (MirrorSources.Source source : sources) {
         String name = source.connectionName();
         String announced = source.announcedId();
         String current = source.remoteId();
         if (announced != null) {
            if (!announced.equals(current)) {
               source.setRemoteId(announced);
               if (current != null) {
                  LOG.info("continuity: mirror connection {} reaches node {}, not {}", name, announced, current);
               }
            }
            if (!announced.equals(known.getProperty(name))) {
               known.setProperty(name, announced);
               learned = true;
            }
         } else if (current == null && known.getProperty(name) != null) {
            source.setRemoteId(known.getProperty(name));
            LOG.info("continuity: mirror connection {} has not connected since this broker activated; it relays as "
                        + "to node {}, where it last connected", name, known.getProperty(name));
         }
      }
      if (learned) {
         save();
      }
      primed = true;
   }

   private void load() {
      try (InputStream input = Files.newInputStream(file)) {
         known.load(input);
      } catch (IOException e) {
         LOG.warn("continuity: {} could not be read: {}", file, e.toString());
      }
   }

   private void save() {
      Path next = file.resolveSibling(FILE + ".next");
      try {
         try (OutputStream output = Files.newOutputStream(next)) {
            known.store(output, "The node each mirror connection reached when it last connected (RelayIdentities)");
         }
         Files.move(next, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } catch (IOException e) {
         LOG.warn("continuity: {} could not be written: {}", file, e.toString());
      }
   }
}
