package continuity.artemis.replication;

import java.util.List;

import org.apache.activemq.artemis.api.core.Message;

import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.SOURCE_ID;

/**
 * Every message of a full_state group carries its identity across datacentres for the swapover's reconciliation
 * (artemis_bridge_reconcile): the source's message id in the long property continuity_source_id. An original gets its
 * own id when it is routed under one of the identity prefixes (its divert copies were made just before and carry the
 * id as Message.HDR_ORIG_MESSAGE_ID); a copy gets that id when it is sent on. Filters can select by it; a broker's
 * own message id is not a filter identifier. An id once stamped is kept (a moved message keeps it).
 */
final class IdentityStamping {
   private final List<String> prefixes;
   private final String datacentre;

   /** prefixes: the addresses whose originals are stamped; datacentre: this broker's (origin of its originals). */
   IdentityStamping(List<String> prefixes, String datacentre) {
      this.prefixes = List.copyOf(prefixes);
      this.datacentre = datacentre;
   }

   /** Whether messages routed to the address are stamped. */
   boolean covers(String address) {
      return address != null && prefixes.stream().anyMatch(address::startsWith);
   }

   /** An original routed under an identity prefix: its own message id, assigned by now, becomes its identity. */
   void stampOriginal(Message message) {
      if (!covers(message.getAddress()) || message.isLargeMessage()) {
         return;
      }
      if (message.getObjectProperty(ORIGIN) == null && message.getObjectProperty(SOURCE_ID) == null) {
         message.putLongProperty(SOURCE_ID, message.getMessageID());
         message.reencode();
      }
   }

   /** A copy sent on: the id of its original, which the divert recorded, unless it has an identity already. */
   static void stampCopy(Message copy) {
      Object sourceId = copy.getBrokerProperty(Message.HDR_ORIG_MESSAGE_ID);
      if (sourceId instanceof Number id && copy.getObjectProperty(SOURCE_ID) == null) {
         copy.putLongProperty(SOURCE_ID, id.longValue());
      }
   }

   /** A message's identity across datacentres: where it was produced and its id there; null without one. */
   String identity(Message message) {
      Object origin = message.getObjectProperty(ORIGIN);
      Object sourceId = message.getObjectProperty(SOURCE_ID);
      return sourceId instanceof Number id ? identity(origin == null ? datacentre : origin.toString(), id.longValue())
                                            : null;
   }

   static String identity(String origin, long sourceId) {
      return origin + ":" + sourceId;
   }
}
