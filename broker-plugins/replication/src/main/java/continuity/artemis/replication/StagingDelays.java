package continuity.artemis.replication;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.activemq.artemis.api.core.Message;

import static continuity.artemis.replication.EstateProperties.ORIGIN;
import static continuity.artemis.replication.EstateProperties.PRODUCED_AT;

/**
 * The groups active at every datacentre (a staging delay): an option per prefix, staging-delay.<prefix> =
 * "<delay in ms> <group>", beside notice-prefix. A message produced under such a prefix is stamped with its production
 * time (continuity_produced_at) before it is routed, so the divert's copies carry it; a copy arriving under it is
 * scheduled for that time plus the delay.
 */
final class StagingDelays {
   static final String OPTION = "staging-delay.";

   /** A group active at every datacentre: its delay and the address its notices go to. */
   record Group(String name, long delayMillis, String noticeAddress) { }

   private final Map<String, Group> byPrefix;

   private StagingDelays(Map<String, Group> byPrefix) {
      this.byPrefix = Collections.unmodifiableMap(byPrefix);
   }

   /** The staging-delay.<prefix> options of the plugin's properties. */
   static StagingDelays parse(Map<String, String> properties) {
      String noticePrefix = properties.getOrDefault("notice-prefix", "");
      Map<String, Group> byPrefix = new LinkedHashMap<>();
      for (Map.Entry<String, String> option : properties.entrySet()) {
         if (!option.getKey().startsWith(OPTION)) {
            continue;
         }
         String[] value = option.getValue().trim().split(" ");
         if (value.length != 2 || noticePrefix.isEmpty() || !value[0].matches("[0-9]+")) {
            throw new IllegalArgumentException("InboundCopies: " + option.getKey() + " must be \"<delay in ms> <group>\""
                                                  + " beside a notice-prefix, got " + option.getValue());
         }
         byPrefix.put(option.getKey().substring(OPTION.length()),
                      new Group(value[1], Long.parseLong(value[0]), noticePrefix + value[1]));
      }
      return new StagingDelays(byPrefix);
   }

   boolean isEmpty() {
      return byPrefix.isEmpty();
   }

   /** The group active everywhere whose messages the address holds; null if none. */
   Group of(String address) {
      if (address == null) {
         return null;
      }
      for (Map.Entry<String, Group> entry : byPrefix.entrySet()) {
         if (address.startsWith(entry.getKey())) {
            return entry.getValue();
         }
      }
      return null;
   }

   /** The group whose notices go to the address; null if none. */
   Group noticedAt(String address) {
      return byPrefix.values().stream().filter(group -> group.noticeAddress().equals(address)).findFirst()
         .orElse(null);
   }

   /** An original produced under a delayed prefix: the time it was produced, before the diverts copy it. */
   void stampProduction(Message message, long now) {
      if (of(message.getAddress()) != null && message.getObjectProperty(ORIGIN) == null
            && message.getObjectProperty(PRODUCED_AT) == null) {
         message.putLongProperty(PRODUCED_AT, now);
         message.reencode();
      }
   }

   /** A copy sent on to a delayed group's address: delivered at its production time plus the delay. */
   void schedule(Message copy, long now) {
      Group group = of(copy.getAddress());
      if (group != null) {
         Object producedAt = copy.getObjectProperty(PRODUCED_AT);
         long from = producedAt instanceof Number at ? at.longValue() : now;
         copy.setScheduledDeliveryTime(from + group.delayMillis());
      }
   }
}
