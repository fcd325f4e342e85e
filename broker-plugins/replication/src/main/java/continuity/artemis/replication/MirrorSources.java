/*
 * The mirror connections of a broker (Artemis's AMQPMirrorControllerSource, one per broker connection with a mirror,
 * under an AMQPMirrorControllerAggregation when there are several), reached by the names of their methods and of
 * their field remoteMirrorId: they are not Artemis's API, and the plugins build against artemis-server alone.
 */
package continuity.artemis.replication;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

import org.apache.activemq.artemis.core.server.BrokerConnection;

final class MirrorSources implements Iterable<MirrorSources.Source> {
   private final List<Source> sources;

   private MirrorSources(List<Source> sources) {
      this.sources = sources;
   }

   /** The mirror connections behind the broker's mirror controller (none when it has none). */
   static MirrorSources of(Object controller) throws ReflectiveOperationException {
      List<Source> sources = new ArrayList<>();
      if (controller != null) {
         Method partitions = method(controller.getClass(), "getPartitions");
         if (partitions != null) {
            for (Object source : (Iterable<?>) partitions.invoke(controller)) {
               sources.add(new Source(source));
            }
         } else {
            sources.add(new Source(controller));
         }
      }
      return new MirrorSources(sources);
   }

   boolean isEmpty() {
      return sources.isEmpty();
   }

   @Override
   public Iterator<Source> iterator() {
      return sources.iterator();
   }

   private static Method method(Class<?> type, String name, Class<?>... parameters) {
      try {
         return type.getMethod(name, parameters);
      } catch (NoSuchMethodException e) {
         return null;
      }
   }

   private static Method required(Class<?> type, String name, Class<?>... parameters)
      throws NoSuchMethodException {
      return type.getMethod(name, parameters);
   }

   /** One mirror connection. */
   static final class Source {
      private final Object source;
      private final String connectionName;
      private final Method getLink;
      private final Method announcedBy;
      private final Field remoteId;

      Source(Object source) throws ReflectiveOperationException {
         this.source = source;
         connectionName = ((BrokerConnection) required(source.getClass(), "getBrokerConnection").invoke(source))
            .getName();
         getLink = required(source.getClass(), "getLink");
         announcedBy = staticMethod(source.getClass(), "getRemoteMirrorID", getLink.getReturnType());
         remoteId = field(source.getClass(), "remoteMirrorId");
      }

      private static Method staticMethod(Class<?> type, String name, Class<?> parameter)
         throws NoSuchMethodException {
         for (Method candidate : type.getMethods()) {
            if (candidate.getName().equals(name) && candidate.getParameterCount() == 1
                && candidate.getParameterTypes()[0].isAssignableFrom(parameter)
                && Modifier.isStatic(candidate.getModifiers())) {
               return candidate;
            }
         }
         throw new NoSuchMethodException(type.getName() + "." + name);
      }

      private static Field field(Class<?> type, String name) throws NoSuchFieldException {
         for (Class<?> current = type; current != null; current = current.getSuperclass()) {
            try {
               Field found = current.getDeclaredField(name);
               found.setAccessible(true);
               return found;
            } catch (NoSuchFieldException e) {
               // declared further up
            }
         }
         throw new NoSuchFieldException(type.getName() + "." + name);
      }

      String connectionName() {
         return connectionName;
      }

      /** The node ID the remote announced on the connection's link, null while it has not attached. */
      String announcedId() {
         try {
            Object link = getLink.invoke(source);
            return link == null ? null : (String) announcedBy.invoke(null, link);
         } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
         }
      }

      /** The node ID the connection takes for its remote's (null: not known since the broker activated). */
      String remoteId() {
         try {
            return (String) remoteId.get(source);
         } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
         }
      }

      void setRemoteId(String id) {
         try {
            remoteId.set(source, id);
         } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
         }
      }
   }
}
