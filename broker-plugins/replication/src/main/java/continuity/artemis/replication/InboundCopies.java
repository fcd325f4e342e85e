/*
 * The bridge engine's broker plugin: what the estate does to a message as a broker routes it, in four parts.
 * - CopyForwarding: a copy another datacentre's bridge delivered to an inbound address goes on to its own address.
 * - IdentityStamping: every message of a full_state group carries its identity across datacentres.
 * - StagingDelays: a copy of a group active everywhere is delivered its delay after its production.
 * - AckNotices (with NoticeMetrics): an acknowledgement there removes the other datacentres' copies.
 *
 * Only the estate stamps the continuity_ properties (EstateProperties), and only the other datacentres' brokers (a
 * session whose login holds the role named by the option peer-role) deliver copies: a client's message loses those
 * properties before it is routed, and a client's send to an inbound address is not sent on (the broker's security
 * refuses it there). Nothing a client sends decides what replication does with a message.
 *
 * Options (a <property> of <broker-plugin> in broker.xml): inbound-prefix, peer-role, identity-prefixes
 * (comma-separated, may be empty); for the staging delays, staging-delay.<prefix> (StagingDelays), notice-prefix and
 * datacentre. The broker role installs it built on the controller (broker-plugins/, make plugins).
 */
package continuity.artemis.replication;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import javax.security.auth.Subject;

import org.apache.activemq.artemis.api.core.Interceptor;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.protocol.core.Packet;
import org.apache.activemq.artemis.core.protocol.core.impl.wireformat.MessagePacketI;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.MessageReference;
import org.apache.activemq.artemis.core.server.RoutingContext;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.impl.AckReason;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.security.jaas.RolePrincipal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class InboundCopies implements ActiveMQServerPlugin {
   private static final Logger LOG = LoggerFactory.getLogger(InboundCopies.class);

   private final Interceptor interceptor = this::intercept;
   private String inboundPrefix;
   private String peerRole;
   private String datacentre;
   private IdentityStamping identities;
   private StagingDelays staging;
   private CopyForwarding forwarding;
   private AckNotices notices;

   @Override
   public void init(Map<String, String> properties) {
      inboundPrefix = required(properties, "inbound-prefix");
      peerRole = required(properties, "peer-role");
      List<String> identityPrefixes = Arrays.stream(properties.getOrDefault("identity-prefixes", "").split(","))
         .map(String::trim).filter(prefix -> !prefix.isEmpty()).toList();
      staging = StagingDelays.parse(properties);
      datacentre = properties.get("datacentre");
      if (!staging.isEmpty() && (datacentre == null || datacentre.isEmpty())) {
         throw new IllegalArgumentException("InboundCopies: staging delays need the property datacentre");
      }
      identities = new IdentityStamping(identityPrefixes, datacentre);
   }

   private static String required(Map<String, String> properties, String name) {
      String value = properties.get(name);
      if (value == null || value.isEmpty()) {
         throw new IllegalArgumentException("InboundCopies: the property " + name + " is not set");
      }
      return value;
   }

   @Override
   public void registered(ActiveMQServer server) {
      NoticeMetrics metrics = new NoticeMetrics(
         () -> server.getMetricsManager() == null ? null : server.getMetricsManager().getMeterRegistry());
      notices = new AckNotices(server, identities, datacentre, metrics);
      forwarding = new CopyForwarding(inboundPrefix, staging, server::getAddressInfo, this::ensureNoticeAddress);
      server.getRemotingService().addIncomingInterceptor(interceptor);
   }

   @Override
   public void unregistered(ActiveMQServer server) {
      server.getRemotingService().removeIncomingInterceptor(interceptor);
   }

   private void ensureNoticeAddress(SimpleString address) {
      try {
         notices.ensureAddress(address);
      } catch (Exception e) {
         LOG.warn("continuity: the notice address {} could not be created: {}", address, e.toString());
      }
   }

   /** Whether the connection logged in as another datacentre's broker. */
   private boolean isPeer(RemotingConnection connection) {
      Subject subject = connection == null ? null : connection.getSubject();
      return subject != null && subject.getPrincipals(RolePrincipal.class).stream()
         .anyMatch(role -> peerRole.equals(role.getName()));
   }

   private boolean intercept(Packet packet, RemotingConnection connection) {
      if (packet instanceof MessagePacketI && isPeer(connection)) {
         forwarding.forward(packet);
      }
      return true;
   }

   /** A client's message loses what only the estate stamps; an original of a group active everywhere, its time. */
   @Override
   public void beforeSend(ServerSession session, Transaction tx, Message message, boolean direct,
                          boolean noAutoCreateQueue) {
      if (!isPeer(session.getRemotingConnection())) {
         EstateProperties.strip(message);
      }
      staging.stampProduction(message, System.currentTimeMillis());
   }

   @Override
   public void beforeMessageRoute(Message message, RoutingContext context, boolean direct, boolean rejectDuplicates) {
      String address = message.getAddress();
      StagingDelays.Group noticed = staging.noticedAt(address);
      if (noticed != null) {
         notices.arrived(noticed, message, context.getTransaction());
         return;
      }
      if (!identities.covers(address) || message.isLargeMessage()) {
         return;
      }
      identities.stampOriginal(message);
      if (staging.of(address) != null) {
         notices.routed(message);
      }
   }

   @Override
   public void messageAcknowledged(Transaction tx, MessageReference reference, AckReason reason,
                                   ServerConsumer consumer) {
      Message message = reference.getMessage();
      StagingDelays.Group group = staging.of(message.getAddress());
      if (group != null) {
         notices.acknowledged(group, message, reference.getQueue().getName().toString(),
                              reason == AckReason.NORMAL && consumer != null);
      }
   }
}
