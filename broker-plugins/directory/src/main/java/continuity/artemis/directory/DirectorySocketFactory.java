package continuity.artemis.directory;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;

import javax.net.SocketFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;

/**
 * The socket factory of the broker's LDAPS connections (JNDI's java.naming.ldap.factory.socket, set in login.config):
 * TLS that trusts the directory's CAs alone, read from etc/tls/ldap-ca.pem, so that the JVM's default trust, which
 * other connections may rely on, stays as it is. JNDI still checks the directory's name against its certificate.
 */
public final class DirectorySocketFactory extends SSLSocketFactory {

   static final String CA_FILE = "tls/ldap-ca.pem";

   private static final class Holder {
      static final SSLSocketFactory TRUSTING_THE_DIRECTORY = trustingTheDirectory();
   }

   private final SSLSocketFactory delegate = Holder.TRUSTING_THE_DIRECTORY;

   /** What JNDI calls to get the factory. */
   public static SocketFactory getDefault() {
      return new DirectorySocketFactory();
   }

   private static SSLSocketFactory trustingTheDirectory() {
      String etc = System.getProperty("artemis.instance.etc");
      if (etc == null) {
         throw new IllegalStateException("artemis.instance.etc is not set: the directory's CAs cannot be found");
      }
      Path file = Path.of(etc, CA_FILE);
      try (InputStream pem = Files.newInputStream(file)) {
         KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
         trusted.load(null, null);
         int number = 0;
         for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(pem)) {
            trusted.setCertificateEntry("directory-ca-" + number++, certificate);
         }
         if (number == 0) {
            throw new IllegalStateException(file + " holds no certificate");
         }
         TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
         trust.init(trusted);
         SSLContext context = SSLContext.getInstance("TLS");
         context.init(null, trust.getTrustManagers(), null);
         return context.getSocketFactory();
      } catch (IOException e) {
         throw new UncheckedIOException("cannot read the directory's CAs from " + file, e);
      } catch (GeneralSecurityException e) {
         throw new IllegalStateException("cannot trust the directory's CAs of " + file, e);
      }
   }

   @Override
   public String[] getDefaultCipherSuites() {
      return delegate.getDefaultCipherSuites();
   }

   @Override
   public String[] getSupportedCipherSuites() {
      return delegate.getSupportedCipherSuites();
   }

   @Override
   public Socket createSocket() throws IOException {
      return delegate.createSocket();
   }

   @Override
   public Socket createSocket(Socket socket, String host, int port, boolean autoClose) throws IOException {
      return delegate.createSocket(socket, host, port, autoClose);
   }

   @Override
   public Socket createSocket(String host, int port) throws IOException {
      return delegate.createSocket(host, port);
   }

   @Override
   public Socket createSocket(String host, int port, InetAddress localHost, int localPort) throws IOException {
      return delegate.createSocket(host, port, localHost, localPort);
   }

   @Override
   public Socket createSocket(InetAddress host, int port) throws IOException {
      return delegate.createSocket(host, port);
   }

   @Override
   public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort)
         throws IOException {
      return delegate.createSocket(address, port, localAddress, localPort);
   }
}
