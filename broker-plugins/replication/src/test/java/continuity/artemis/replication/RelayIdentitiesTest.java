package continuity.artemis.replication;

import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.apache.activemq.artemis.core.server.BrokerConnection;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Mirror connections shaped as Artemis's (the methods and the field MirrorSources reaches by name): one broker's
 * connections before and after a restart, sharing its data directory. RelayIdentities against Artemis's own classes:
 * `make reproduce-mirror-relay-drop`.
 */
class RelayIdentitiesTest {
   @TempDir
   Path data;

   /** The AMQP link of a connection, as far as the remote's announced ID goes. */
   record Link(String announced) { }

   /** A connection as Artemis's AMQPMirrorControllerSource: its broker connection, its link, the remote's ID. */
   public static class Source {
      protected String remoteMirrorId;
      private final BrokerConnection connection;
      private Link link;

      Source(String name) {
         connection = (BrokerConnection) Proxy.newProxyInstance(BrokerConnection.class.getClassLoader(),
            new Class<?>[] {BrokerConnection.class}, (proxy, method, arguments) ->
               method.getName().equals("getName") ? name : null);
      }

      public BrokerConnection getBrokerConnection() {
         return connection;
      }

      public Link getLink() {
         return link;
      }

      public static String getRemoteMirrorID(Link link) {
         return link == null ? null : link.announced();
      }
   }

   /** Several connections, as Artemis's AMQPMirrorControllerAggregation. */
   public record Aggregation(List<Source> sources) {
      public List<Source> getPartitions() {
         return sources;
      }
   }

   private Path file() {
      return data.resolve(RelayIdentities.FILE);
   }

   private static void prime(RelayIdentities plugin, Object controller) throws ReflectiveOperationException {
      plugin.prime(MirrorSources.of(controller));
   }

   @Test
   void aConnectionThatNeverConnectedKeepsArtemisBehaviour() throws Exception {
      Source toDc3 = new Source("dc3_inflow");
      prime(new RelayIdentities(file()), toDc3);
      assertNull(toDc3.remoteMirrorId);
      assertFalse(Files.exists(file()));
   }

   @Test
   void aRestartedBrokerRelaysAsToTheNodeItLastReached() throws Exception {
      Source toDc1 = new Source("dc1_inflow");
      Source toDc3 = new Source("dc3_inflow");
      toDc1.link = new Link("node-dc1");
      toDc3.link = new Link("node-dc3");
      prime(new RelayIdentities(file()), new Aggregation(List.of(toDc1, toDc3)));
      assertEquals("node-dc3", toDc3.remoteMirrorId);
      assertTrue(Files.readString(file()).contains("dc3_inflow=node-dc3"));

      // Restarted: dc1 answers again, dc3 is cut off.
      Source again1 = new Source("dc1_inflow");
      Source again3 = new Source("dc3_inflow");
      again1.link = new Link("node-dc1");
      prime(new RelayIdentities(file()), new Aggregation(List.of(again1, again3)));
      assertEquals("node-dc1", again1.remoteMirrorId);
      assertEquals("node-dc3", again3.remoteMirrorId);
   }

   @Test
   void whatTheRemoteAnnouncesReplacesWhatWasKept() throws Exception {
      Source toDc3 = new Source("dc3_inflow");
      toDc3.link = new Link("node-dc3");
      prime(new RelayIdentities(file()), toDc3);

      // dc3's journal was replaced: a new node ID once the connection connects.
      Source again = new Source("dc3_inflow");
      RelayIdentities restarted = new RelayIdentities(file());
      prime(restarted, again);
      assertEquals("node-dc3", again.remoteMirrorId);
      again.link = new Link("node-dc3-rebuilt");
      prime(restarted, again);
      assertEquals("node-dc3-rebuilt", again.remoteMirrorId);
      assertTrue(Files.readString(file()).contains("dc3_inflow=node-dc3-rebuilt"));
   }
}
