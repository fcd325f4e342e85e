/*
 * The activation check: a datacentre lost in a failover comes back fenced, not believing it is still active.
 *
 * Each time artemis_site activates a datacentre it sends every live broker that answers, in every datacentre, a record
 * per group (continuity_group, continuity_active_datacentre, continuity_activated_at in ms) to the last-value queue
 * continuity.activation. A datacentre that was lost misses the records of the failover that replaced it, and its
 * journal still grants its clients the groups. So when this broker activates (it starts, or a backup takes over),
 * after its journal is loaded and before its acceptors open, it reads the records kept here and at the brokers of the
 * other datacentres (core protocol, logged in by its certificate, which may only browse there). For each group whose
 * newest record names another datacentre it applies the group's fenced security settings, exactly those artemis_site
 * applies with state=passive, persisted as artemis_site's are, before the acceptors open (a broker stopped a moment
 * later, or the backup replicating its journal, starts fenced). It never opens anything to clients.
 *
 * A broker that does not answer within the timeout is not heard. When no broker of the other datacentres answers, the
 * datacentre may be the only one left, or cut off from the others by a partition that also hid a failover. A broker
 * that starts cold then (it was not a backup in sync taking over from its live peer) and keeps activation records
 * (the estate was activated while it ran) holds its groups (unheard=hold, the default): it applies their fences in
 * memory only, not in the journal, so that it is not active beside a datacentre a failover activated meanwhile; it
 * keeps in the journal that it holds them (a message on continuity.activation that no reader takes for a record). A
 * backup taking over keeps its settings, its pair live a moment ago, except the groups that pair held (2 x 2 seed 11:
 * a primary that held its groups was killed and its backup took over unheard, active beside the failover's
 * datacentre): it holds those, unless an activation was recorded for the group since. A broker that hears another
 * datacentre at activation removes the holds kept. With unheard=keep, or in those cases, the broker keeps its
 * settings and says so. Either way it then asks the other datacentres again every recheck-ms for as
 * long as it is live (an answer from one datacentre does not speak for another that was down when a failover ran). At
 * the first answer a held group is fenced for good (persisted) when its newest record names another datacentre, and
 * released (its settings as they were) otherwise; a held group whose settings were changed meanwhile (artemis_site) is
 * left as they are. A group not held whose newest record names another datacentre is fenced then, persisted, and the
 * client connections that work on its addresses (or on none known) are closed, as artemis_site picks them; those of
 * the exempt users and roles (the other datacentres' brokers, the HA pair) stay open. It neither waits for deliveries
 * nor pauses queues as artemis_site's fence does. So a partition that hid a failover from this datacentre ends its
 * clients' use of the group once it heals.
 *
 * Options (a <property> of <broker-plugin> in broker.xml): datacentre; connectors (comma-separated names of
 * broker.xml's connectors to the other datacentres' brokers); user (the login the certificate maps to); timeout-ms;
 * recheck-ms; unheard (hold or keep); exempt-users and exempt-roles (comma-separated); and per group fence.<group>, a
 * JSON object: match -> the roles of each permission, comma-separated, in the order of
 * ActiveMQServerControl.addSecuritySettings.
 */
package continuity.artemis.replication;

import java.io.StringReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

import javax.security.auth.Subject;
import java.util.function.Predicate;

import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.filter.impl.FilterImpl;
import org.apache.activemq.artemis.core.message.impl.CoreMessage;
import org.apache.activemq.artemis.core.persistence.config.PersistedSecuritySetting;
import org.apache.activemq.artemis.core.security.Role;
import org.apache.activemq.artemis.core.server.ActivateCallback;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.MessageReference;
import org.apache.activemq.artemis.core.server.Queue;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerProducer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.apache.activemq.artemis.core.settings.impl.Match;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.impl.TransactionImpl;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.security.jaas.RolePrincipal;
import org.apache.activemq.artemis.json.JsonArray;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.utils.JsonLoader;
import org.apache.activemq.artemis.utils.SecurityFormatter;
import org.apache.activemq.artemis.utils.collections.LinkedListIterator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class ActivationCheck implements ActiveMQServerPlugin {
   private static final SimpleString RECORDS = SimpleString.of("continuity.activation");
   private static final String GROUP = "continuity_group";
   private static final String DATACENTRE = "continuity_active_datacentre";
   private static final String ACTIVATED_AT = "continuity_activated_at";
   // A hold kept in the journal: its last-value key is the group's with this prefix (group names have no colon).
   private static final String HOLD_KEY_PREFIX = "held:";
   private static final String HELD_AT = "continuity_held_at";
   // The permissions of a fence's roles, in the order of addSecuritySettings (and of the Python PERMISSIONS).
   private static final List<Predicate<Role>> PERMISSIONS = List.of(
      Role::isSend, Role::isConsume, Role::isCreateDurableQueue, Role::isDeleteDurableQueue,
      Role::isCreateNonDurableQueue, Role::isDeleteNonDurableQueue, Role::isManage, Role::isBrowse,
      Role::isCreateAddress, Role::isDeleteAddress);
   private static final Logger LOG = LoggerFactory.getLogger(ActivationCheck.class);

   /** An activation record, and where it was read. */
   record Activation(String group, String datacentre, long at, String keptBy) { }

   /** A match held: its settings before (null: none of its own) and the fence put in their place. */
   record Held(Set<Role> before, Set<Role> fence) { }

   private String datacentre;
   private List<String> connectors = List.of();
   private String user;
   private long timeoutMillis = 5000;
   private long recheckMillis = 10000;
   private boolean holdWhenUnheard = true;
   private Set<String> exemptUsers = Set.of();
   private Set<String> exemptRoles = Set.of();
   // Asks the other datacentres again while none has answered since this broker activated.
   private ScheduledExecutorService rechecks;
   private volatile boolean unheard;
   // While groups are held, a re-check says at info level, once a minute, who did not answer and why (3 x 1 seed 5: a
   // hold that lasted 83 s while a datacentre answered the bed's other clients left nothing to say why).
   private static final long HOLD_REPORT_MILLIS = 60000;
   private long lastHoldReport;
   // group -> match -> roles per permission
   private final Map<String, Map<String, List<String>>> fences = new TreeMap<>();
   // Groups held (fenced in memory) at a cold start that heard nobody: group -> match -> the settings before and the
   // fence applied.
   private final Map<String, Map<String, Held>> held = new TreeMap<>();
   // Whether this broker has been a backup in sync with its live peer since it last activated (polled).
   private volatile boolean syncedAsBackup;
   private volatile boolean sharedStoreBackup;
   private ScheduledExecutorService watch;
   private ActiveMQServer server;
   private final AtomicInteger checks = new AtomicInteger();
   // Tests only: the next activations are taken for a backup in sync taking over (one JVM has no replicated pair).
   private volatile boolean assumeTakeover;

   @Override
   public void init(Map<String, String> properties) {
      datacentre = properties.get("datacentre");
      if (datacentre == null || datacentre.isEmpty()) {
         throw new IllegalArgumentException("ActivationCheck needs the option datacentre");
      }
      String names = properties.getOrDefault("connectors", "");
      connectors = names.isEmpty() ? List.of() : Arrays.asList(names.split(","));
      user = properties.get("user");
      timeoutMillis = Long.parseLong(properties.getOrDefault("timeout-ms", "5000"));
      recheckMillis = Long.parseLong(properties.getOrDefault("recheck-ms", "10000"));
      if (recheckMillis <= 0) {
         throw new IllegalArgumentException("ActivationCheck: recheck-ms must be above 0, got " + recheckMillis);
      }
      String whenUnheard = properties.getOrDefault("unheard", "hold");
      if (!whenUnheard.equals("hold") && !whenUnheard.equals("keep")) {
         throw new IllegalArgumentException("ActivationCheck: unheard must be hold or keep, got " + whenUnheard);
      }
      holdWhenUnheard = whenUnheard.equals("hold");
      exemptUsers = Set.copyOf(listed(properties.get("exempt-users")));
      exemptRoles = Set.copyOf(listed(properties.get("exempt-roles")));
      properties.forEach((key, value) -> {
         if (key.startsWith("fence.")) {
            fences.put(key.substring("fence.".length()), fence(value));
         }
      });
   }

   private static List<String> listed(String value) {
      return value == null || value.isBlank() ? List.of()
         : Arrays.stream(value.split(",")).map(String::trim).filter(item -> !item.isEmpty()).toList();
   }

   private static Map<String, List<String>> fence(String json) {
      JsonObject settings = JsonLoader.readObject(new StringReader(json));
      Map<String, List<String>> fence = new TreeMap<>();
      for (String match : settings.keySet()) {
         JsonArray roles = settings.getJsonArray(match);
         List<String> perPermission = new ArrayList<>();
         for (int index = 0; index < roles.size(); index++) {
            perPermission.add(roles.getString(index));
         }
         if (perPermission.size() != PERMISSIONS.size()) {
            throw new IllegalArgumentException("ActivationCheck: the fence of " + match + " names " + perPermission.size()
                                               + " permissions, not " + PERMISSIONS.size());
         }
         fence.put(match, perPermission);
      }
      return fence;
   }

   @Override
   public void registered(ActiveMQServer server) {
      this.server = server;
      if (watch != null) {
         watch.shutdownNow();
      }
      watch = Executors.newSingleThreadScheduledExecutor(runnable -> {
         Thread thread = new Thread(runnable, "continuity-activation-watch");
         thread.setDaemon(true);
         return thread;
      });
      watch.scheduleWithFixedDelay(this::watchReplica, 250, 250, TimeUnit.MILLISECONDS);
      // Artemis registers the plugins again each time the broker starts in its JVM (a primary that goes on as a
      // backup) and keeps the callbacks it was given: one callback, or each activation would check once more.
      server.registerActivateCallback(onActivation);
   }

   private final ActivateCallback onActivation = new ActivateCallback() {
      @Override
      public void preActivate() {
         sharedStoreBackup = server.getHAPolicy() != null && server.getHAPolicy().isBackup()
            && server.getHAPolicy().isSharedStore();
      }

      @Override
      public void activated() {
         check();
      }

      @Override
      public void activationComplete() {
         if (unheard) {
            startRechecks();
         }
      }

      @Override
      public void deActivate() {
         stopRechecks();
         synchronized (held) {
            held.clear();
         }
      }
   };

   @Override
   public void unregistered(ActiveMQServer server) {
      server.unregisterActivateCallback(onActivation);
      stopRechecks();
      if (watch != null) {
         watch.shutdownNow();
      }
   }

   /**
    * A backup that is in sync with its live peer takes over from it when it activates, and does not start cold. The
    * pluggable quorum's backup stops saying it is in sync as it fails over, so this is read while it waits.
    */
   private void watchReplica() {
      try {
         if (!server.isActive() && server.isReplicaSync()) {
            syncedAsBackup = true;
         }
      } catch (RuntimeException e) {
         LOG.debug("Activation check: could not read whether this broker is a backup in sync", e);
      }
   }

   private synchronized void startRechecks() {
      if (rechecks == null) {
         rechecks = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "continuity-activation-recheck");
            thread.setDaemon(true);
            return thread;
         });
         rechecks.scheduleWithFixedDelay(this::recheck, recheckMillis, recheckMillis, TimeUnit.MILLISECONDS);
      }
   }

   private synchronized void stopRechecks() {
      if (rechecks != null) {
         rechecks.shutdownNow();
         rechecks = null;
      }
   }

   /** Tests only: from now on this broker's activations are those of a backup in sync taking over. */
   void assumeTakeover() {
      assumeTakeover = true;
   }

   /** How many activation checks this broker has run since it was created. */
   int checks() {
      return checks.get();
   }

   private void check() {
      checks.incrementAndGet();
      boolean tookOver = syncedAsBackup || sharedStoreBackup || assumeTakeover;
      syncedAsBackup = false;
      List<Activation> kept = kept();
      Map<String, Long> holdsKept = holdsKept();
      List<Activation> records = new ArrayList<>(kept);
      Set<String> heard = new TreeSet<>();
      records.addAll(askOthers(heard, false));
      unheard = !connectors.isEmpty() && heard.isEmpty();
      Set<String> toHold = !unheard || !holdWhenUnheard || kept.isEmpty() ? Set.of()
         : tookOver ? heldByLivePeer(kept, holdsKept) : fences.keySet();
      if (unheard && toHold.isEmpty()) {
         LOG.warn("Activation check: none of the other datacentres' brokers answered within {} ms ({}); this broker "
                  + "keeps its settings ({}) and asks them again every {} ms while it is live", timeoutMillis,
                  connectors, !holdWhenUnheard ? "unheard=keep" : kept.isEmpty() ? "it keeps no activation record"
                     : "a backup taking over from its live peer, which held no group", recheckMillis);
      }
      if (!unheard) {
         // Holds kept by a live peer this broker took over from, or by itself before it stopped, are answered now.
         holdsKept.keySet().forEach(this::forgetHold);
      }
      for (Map.Entry<String, Activation> elsewhere : activatedElsewhere(records, false).entrySet()) {
         String group = elsewhere.getKey();
         Activation newest = elsewhere.getValue();
         try {
            keepFence(group);
            LOG.warn("Activation check: fenced group {} at {}: {} was activated for it at {} (record kept by {}), after "
                     + "this datacentre's own activation; clients may not send or consume here until a swapover",
                     group, datacentre, newest.datacentre(), newest.at(), newest.keptBy());
         } catch (Exception e) {
            LOG.error("Activation check: could not fence group {} at {}", group, datacentre, e);
         }
      }
      if (!toHold.isEmpty()) {
         holdGroups(toHold, tookOver);
      }
   }

   /**
    * The groups a backup taking over holds: those its live peer held when it stopped (the holds it kept in the journal
    * this backup replicated), unless an activation was recorded here for the group since.
    */
   private static Set<String> heldByLivePeer(List<Activation> kept, Map<String, Long> holdsKept) {
      Set<String> groups = new TreeSet<>();
      holdsKept.forEach((group, heldAt) -> {
         if (kept.stream().noneMatch(record -> record.group().equals(group) && record.at() > heldAt)) {
            groups.add(group);
         }
      });
      return groups;
   }

   /** The security settings of a fence's roles per permission (in the order of addSecuritySettings). */
   private static Set<Role> security(List<String> roles) {
      return SecurityFormatter.createSecurity(roles.get(0), roles.get(1), roles.get(2), roles.get(3), roles.get(4),
                                              roles.get(5), roles.get(6), roles.get(7), roles.get(8), roles.get(9));
   }

   /**
    * Fences in memory each of these groups not fenced here, keeping what it replaced, and keeps in the journal that it
    * holds them (not the fence): a backup that takes over from this broker while nobody answers holds them too.
    */
   private void holdGroups(Set<String> toHold, boolean tookOver) {
      List<String> groups = new ArrayList<>();
      long heldAt = System.currentTimeMillis();
      synchronized (held) {
         for (String group : toHold) {
            if (!fences.containsKey(group) || fenced(group)) {
               continue;
            }
            Map<String, Held> matches = new TreeMap<>();
            for (Map.Entry<String, List<String>> setting : fences.get(group).entrySet()) {
               String match = setting.getKey();
               // A match with wildcards is kept apart from a literal one.
               Set<Role> before = server.getSecurityRepository().containsExactMatch(match)
                  || server.getSecurityRepository().containsExactWildcardMatch(match)
                  ? server.getSecurityRepository().getMatch(match) : null;
               Set<Role> fence = security(setting.getValue());
               server.getSecurityRepository().addMatch(match, fence);
               matches.put(match, new Held(before, fence));
            }
            held.put(group, matches);
            groups.add(group);
            keepHold(group, heldAt);
         }
      }
      if (groups.isEmpty()) {
         LOG.warn("Activation check: none of the other datacentres' brokers answered within {} ms ({}); every group is "
                  + "fenced here already; asking them again every {} ms while live", timeoutMillis, connectors,
                  recheckMillis);
         return;
      }
      LOG.warn("Activation check: none of the other datacentres' brokers answered within {} ms ({}) and this broker "
               + "{}: groups {} held at {} (fenced, not in the journal; clients may not send or consume there) until "
               + "one answers, asked every {} ms; then released if the newest record names {}, fenced if it names "
               + "another datacentre", timeoutMillis, connectors,
               tookOver ? "took over from a live peer that held them" : "started cold", groups, datacentre,
               recheckMillis, datacentre);
   }

   /**
    * Settles the held groups once another datacentre answered: fenced for good where the newest record names another
    * datacentre, released otherwise; left as they are where something else (artemis_site) changed their settings.
    */
   private void settleHeld(List<Activation> records) throws Exception {
      Map<String, Map<String, Held>> holding;
      synchronized (held) {
         holding = new TreeMap<>(held);
      }
      for (Map.Entry<String, Map<String, Held>> entry : holding.entrySet()) {
         String group = entry.getKey();
         if (Thread.currentThread().isInterrupted() || !server.isActive()) {
            return;
         }
         synchronized (held) {
            if (held.remove(group) == null) {
               continue;
            }
            boolean ours = entry.getValue().entrySet().stream().allMatch(
               match -> server.getSecurityRepository().getMatch(match.getKey()) == match.getValue().fence());
            if (!ours) {
               forgetHold(group);
               LOG.info("Activation check: group {} was held at {} and its settings have changed since; they stay",
                        group, datacentre);
               continue;
            }
            Activation newest = records.stream().filter(record -> group.equals(record.group()))
               .max((a, b) -> Long.compare(a.at(), b.at())).orElse(null);
            if (newest != null && !newest.datacentre().equals(datacentre)) {
               try {
                  keepFence(group);
               } catch (Exception e) {
                  held.put(group, entry.getValue());  // still held in memory: the next answer tries again
                  throw e;
               }
               forgetHold(group);
               LOG.warn("Activation check: fenced group {} at {}: {} was activated for it at {} (record kept by {}) "
                        + "while the other datacentres did not answer; it was held since this broker activated",
                        group, datacentre, newest.datacentre(), newest.at(), newest.keptBy());
               continue;
            }
            for (Map.Entry<String, Held> match : entry.getValue().entrySet()) {
               if (match.getValue().before() == null) {
                  server.getSecurityRepository().removeMatch(match.getKey());
               } else {
                  server.getSecurityRepository().addMatch(match.getKey(), match.getValue().before());
               }
            }
            forgetHold(group);
            LOG.warn("Activation check: released group {} at {}: another datacentre answered and no record names "
                     + "another datacentre after this one's (newest: {})", group, datacentre,
                     newest == null ? "none" : newest.datacentre() + " at " + newest.at());
         }
      }
   }

   /** The groups not fenced here whose newest record names another datacentre, with that record. */
   private Map<String, Activation> activatedElsewhere(List<Activation> records, boolean quietly) {
      Map<String, Activation> found = new TreeMap<>();
      for (String group : fences.keySet()) {
         Activation newest = records.stream().filter(record -> group.equals(record.group()))
            .max((a, b) -> Long.compare(a.at(), b.at())).orElse(null);
         if (newest == null || newest.datacentre().equals(datacentre)) {
            continue;
         }
         if (fenced(group)) {
            if (!quietly) {
               LOG.info("Activation check: group {} is fenced here; its newest activation ({} at {}, kept by {}) "
                        + "names {}", group, newest.datacentre(), newest.at(), newest.keptBy(), newest.datacentre());
            }
            continue;
         }
         found.put(group, newest);
      }
      return found;
   }

   /**
    * Asked again while live, none of the other datacentres having answered at activation: a group whose newest record
    * names another datacentre is fenced (persisted) and its clients' connections closed. This broker's own records
    * are read after the others' and again before each fence: an operation that activates this datacentre writes its
    * record here before it changes a setting, so its activation is seen rather than undone.
    */
   private void recheck() {
      try {
         Set<String> heard = new TreeSet<>();
         // Quietly: the start said nobody answered, and a lone datacentre would log every question for hours; but
         // once a minute while it holds groups, its clients refused meanwhile.
         boolean holding;
         synchronized (held) {
            holding = !held.isEmpty();
         }
         long now = System.currentTimeMillis();
         boolean report = holding && now - lastHoldReport >= HOLD_REPORT_MILLIS;
         if (report) {
            lastHoldReport = now;
         }
         List<Activation> others = askOthers(heard, !report);
         if (heard.isEmpty()) {
            return;
         }
         settleHeld(withKept(others));
         for (String group : activatedElsewhere(withKept(others), true).keySet()) {
            // Read here again just before the fence.
            Activation newest = activatedElsewhere(withKept(others), true).get(group);
            if (newest != null && !Thread.currentThread().isInterrupted() && server.isActive()) {
               fenceNow(group, newest);
            }
         }
      } catch (Exception e) {
         LOG.warn("Activation check: asking the other datacentres again failed; asking again in {} ms", recheckMillis,
                  e);
      }
   }

   private List<Activation> withKept(List<Activation> others) {
      List<Activation> records = new ArrayList<>(others);
      records.addAll(kept());
      return records;
   }

   private void fenceNow(String group, Activation newest) throws Exception {
      keepFence(group);
      List<Pattern> matches = fences.get(group).keySet().stream()
         .map(match -> new Match<>(match, null, server.getConfiguration().getWildcardConfiguration()).getPattern())
         .toList();
      int closed = 0;
      for (RemotingConnection connection : server.getRemotingService().getConnections()) {
         if (!exempt(connection) && works(connection, matches)) {
            server.getActiveMQServerControl().closeConnectionWithID(connection.getID().toString());
            closed++;
         }
      }
      LOG.warn("Activation check: fenced group {} at {} while active: {} was activated for it at {} (record kept by "
               + "{}) while the other datacentres did not answer; {} client connection(s) closed", group, datacentre,
               newest.datacentre(), newest.at(), newest.keptBy(), closed);
   }

   /**
    * A connection the fence leaves open: logged in with an exempt role (the other datacentres' brokers, whose
    * certificate login names no exempt user), or all its users exempt (none: the broker's own, such as its HA pair's).
    */
   private boolean exempt(RemotingConnection connection) {
      Subject subject = connection.getSubject();
      if (subject != null && subject.getPrincipals(RolePrincipal.class).stream()
            .anyMatch(role -> exemptRoles.contains(role.getName()))) {
         return true;
      }
      return server.getSessions(connection.getID().toString()).stream().map(ServerSession::getUsername)
         .allMatch(user -> user == null || exemptUsers.contains(user));
   }

   /**
    * Whether the connection works on the group's addresses, or on none known (no consumer or producer, or an
    * anonymous producer: what it will do is not known), as artemis_site decides which connections a fence closes.
    */
   private boolean works(RemotingConnection connection, List<Pattern> matches) {
      List<String> addresses = new ArrayList<>();
      for (ServerSession session : server.getSessions(connection.getID().toString())) {
         for (ServerConsumer consumer : session.getServerConsumers()) {
            addresses.add(consumer.getQueueAddress() == null ? null : consumer.getQueueAddress().toString());
         }
         for (ServerProducer producer : session.getServerProducers()) {
            addresses.add(producer.getAddress());
         }
      }
      return addresses.isEmpty() || addresses.stream()
         .anyMatch(address -> address == null || matches.stream().anyMatch(match -> match.matcher(address).matches()));
   }

   /**
    * Applies the group's fence and keeps it in the journal, as the management API's addSecuritySettings does, which
    * refuses until the broker has started: at activation the fence is kept before the acceptors open, so that a broker
    * stopped a moment later (or the backup that replicates its journal) starts fenced.
    */
   private void keepFence(String group) throws Exception {
      for (Map.Entry<String, List<String>> setting : fences.get(group).entrySet()) {
         List<String> roles = setting.getValue();
         server.getSecurityRepository().addMatch(setting.getKey(), security(roles));
         server.getStorageManager().storeSecuritySetting(new PersistedSecuritySetting(
            setting.getKey(), roles.get(0), roles.get(1), roles.get(2), roles.get(3), roles.get(4), roles.get(5),
            roles.get(6), roles.get(7), roles.get(8), roles.get(9), "", ""));
      }
   }

   /**
    * Keeps in the journal, beside the activation records (last value per group key), that this broker holds the group
    * since heldAt. It is not an activation record: a record needs the active datacentre, so no reader takes it for one.
    */
   private void keepHold(String group, long heldAt) {
      if (server.locateQueue(RECORDS) == null) {
         return;
      }
      try {
         CoreMessage hold = new CoreMessage(server.getStorageManager().generateID(), 64);
         hold.setAddress(RECORDS);
         hold.setDurable(true);
         hold.putStringProperty(GROUP, HOLD_KEY_PREFIX + group);
         hold.putStringProperty(HELD_AT, Long.toString(heldAt));
         Transaction transaction = new TransactionImpl(server.getStorageManager());
         server.getPostOffice().route(hold, transaction, false);
         transaction.commit();
         if (!server.getStorageManager().waitOnOperations(timeoutMillis)) {
            LOG.warn("Activation check: the hold of group {} at {} was not written within {} ms", group, datacentre,
                     timeoutMillis);
         }
      } catch (Exception e) {
         LOG.error("Activation check: group {} is held at {} but the hold could not be kept in the journal; a backup "
                   + "that takes over while nobody answers would not hold it", group, datacentre, e);
      }
   }

   /** Removes the hold of the group kept in the journal, if any. */
   private void forgetHold(String group) {
      Queue queue = server.locateQueue(RECORDS);
      if (queue == null) {
         return;
      }
      try {
         queue.deleteMatchingReferences(FilterImpl.createFilter(GROUP + " = '" + HOLD_KEY_PREFIX + group + "'"));
      } catch (Exception e) {
         LOG.warn("Activation check: could not remove the hold of group {} kept at {}", group, datacentre, e);
      }
   }

   /** Whether every match of the group's fence already has the fence's roles here. */
   private boolean fenced(String group) {
      for (Map.Entry<String, List<String>> setting : fences.get(group).entrySet()) {
         Set<Role> roles = server.getSecurityRepository().getMatch(setting.getKey());
         for (int index = 0; index < PERMISSIONS.size(); index++) {
            Set<String> granted = new TreeSet<>();
            for (Role role : roles == null ? Collections.<Role>emptySet() : roles) {
               if (PERMISSIONS.get(index).test(role)) {
                  granted.add(role.getName());
               }
            }
            String wanted = setting.getValue().get(index);
            if (!granted.equals(new TreeSet<>(wanted.isEmpty() ? List.of() : Arrays.asList(wanted.split(","))))) {
               return false;
            }
         }
      }
      return true;
   }

   /** The records this broker keeps. */
   private List<Activation> kept() {
      List<Activation> records = new ArrayList<>();
      for (Message message : keptMessages()) {
         Activation record = activation(message, "this broker");
         if (record != null) {
            records.add(record);
         }
      }
      return records;
   }

   /** The holds kept here (by this broker, or by the live peer whose journal it replicated): group -> held since. */
   private Map<String, Long> holdsKept() {
      Map<String, Long> holds = new TreeMap<>();
      for (Message message : keptMessages()) {
         String key = message.getStringProperty(GROUP);
         String heldAt = message.getStringProperty(HELD_AT);
         if (key != null && key.startsWith(HOLD_KEY_PREFIX) && heldAt != null) {
            try {
               holds.put(key.substring(HOLD_KEY_PREFIX.length()), Long.parseLong(heldAt));
            } catch (NumberFormatException e) {
               LOG.warn("Activation check: a hold of group {} kept here has no time: {}", key, heldAt);
            }
         }
      }
      return holds;
   }

   private List<Message> keptMessages() {
      List<Message> messages = new ArrayList<>();
      Queue queue = server.locateQueue(RECORDS);
      if (queue == null) {
         return messages;
      }
      try (LinkedListIterator<MessageReference> references = queue.browserIterator()) {
         while (references.hasNext()) {
            messages.add(references.next().getMessage());
         }
      } catch (Exception e) {
         LOG.warn("Activation check: could not read this broker's activation records", e);
      }
      return messages;
   }

   /**
    * The records the other datacentres' brokers keep, asked side by side; ``heard`` gets those that answered. Quietly
    * (a re-check, every recheck-ms for as long as the broker is live): who answered and who did not at debug level.
    */
   private List<Activation> askOthers(Set<String> heard, boolean quietly) {
      List<Activation> records = Collections.synchronizedList(new ArrayList<>());
      if (connectors.isEmpty()) {
         return records;
      }
      ExecutorService asking = Executors.newFixedThreadPool(connectors.size(), runnable -> {
         Thread thread = new Thread(runnable, "continuity-activation-check");
         thread.setDaemon(true);
         return thread;
      });
      try {
         List<CompletableFuture<Void>> answers = new ArrayList<>();
         for (String connector : connectors) {
            answers.add(CompletableFuture.runAsync(() -> {
               List<Activation> kept = ask(connector, quietly);
               records.addAll(kept);
               synchronized (heard) {
                  heard.add(connector);
               }
            }, asking));
         }
         try {
            CompletableFuture.allOf(answers.toArray(new CompletableFuture[0])).get(timeoutMillis, TimeUnit.MILLISECONDS);
         } catch (Exception e) {
            // whoever has not answered by now is not heard; the reasons were logged by ask()
         }
         synchronized (heard) {
            if (quietly) {
               LOG.debug("Activation check at {}: heard {} of {} ({} records there)", datacentre, heard, connectors,
                         records.size());
            } else {
               LOG.info("Activation check at {}: heard {} of {} ({} records there)", datacentre, heard, connectors,
                        records.size());
            }
            return new ArrayList<>(records);
         }
      } finally {
         asking.shutdownNow();
      }
   }

   private List<Activation> ask(String connector, boolean quietly) {
      List<Activation> records = new ArrayList<>();
      TransportConfiguration transport = server.getConfiguration().getConnectorConfigurations().get(connector);
      if (transport == null) {
         LOG.warn("Activation check: no connector {} in broker.xml", connector);
         throw new IllegalStateException("no connector " + connector);
      }
      try (ServerLocator locator = ActiveMQClient.createServerLocatorWithoutHA(transport)) {
         locator.setReconnectAttempts(0).setInitialConnectAttempts(1).setCallTimeout(timeoutMillis)
            .setCallFailoverTimeout(timeoutMillis);
         try (ClientSessionFactory factory = locator.createSessionFactory();
              ClientSession session = factory.createSession(user, null, false, true, true, false, 0)) {
            session.start();
            try (ClientConsumer browser = session.createConsumer(RECORDS, true)) {
               ClientMessage message;
               while ((message = browser.receive(500)) != null) {
                  Activation record = activation(message, connector);
                  if (record != null) {
                     records.add(record);
                  }
               }
            }
         }
      } catch (Exception e) {
         if (quietly) {
            LOG.debug("Activation check: {} did not answer: {}", connector, e.toString());
         } else {
            LOG.info("Activation check: {} did not answer: {}", connector, e.toString());
         }
         throw new IllegalStateException(e);
      }
      return records;
   }

   private static Activation activation(Message message, String keptBy) {
      String group = message.getStringProperty(GROUP);
      String active = message.getStringProperty(DATACENTRE);
      String at = message.getStringProperty(ACTIVATED_AT);
      if (group == null || active == null || at == null) {
         return null;
      }
      try {
         return new Activation(group, active, Long.parseLong(at), keptBy);
      } catch (NumberFormatException e) {
         return null;
      }
   }
}
