/*
 * Artemis's own metrics (its <metrics> plugin mechanism) in Prometheus exposition, served over HTTPS with HTTP Basic
 * authentication against the broker's JAAS domain, to the users of one role only.
 *
 * It runs against the distribution's lib/ and the Prometheus registry jars the broker role installs beside it. It reads
 * no MBean: the meters are Artemis's
 * (registered by its MetricsManager on this registry), so management.xml's authorisation is neither needed nor
 * bypassed for anything but these read-only figures.
 *
 * Options (the <property> children of <plugin> in broker.xml): bind, port, key-store-path (a PEM file holding the key
 * and certificate), jaas-domain, role; optionally certificates (comma-separated PEM files whose certificates' ends
 * are published).
 */
package continuity.artemis.metrics;

import com.sun.net.httpserver.BasicAuthenticator;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.MultiGauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.Principal;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.security.auth.Subject;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.LoginContext;
import javax.security.auth.login.LoginException;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.metrics.ActiveMQMetricsPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class PrometheusMetricsPlugin implements ActiveMQMetricsPlugin {

    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(PrometheusMetricsPlugin.class);
    // Artemis's role principal, by name: its class comes from the broker's class loader, not ours.
    private static final String ROLE_PRINCIPAL = "org.apache.activemq.artemis.spi.core.security.jaas.RolePrincipal";
    private static final Pattern PEM_CERTIFICATE =
            Pattern.compile("-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\\s]+)-----END CERTIFICATE-----");

    private transient PrometheusMeterRegistry registry;
    private transient Map<String, String> options;
    private transient Thread opener;
    private transient volatile ActiveMQServer broker;
    private final transient Set<String> connectionGauges = new HashSet<>();
    private transient MultiGauge certificateExpiry;

    @Override
    public ActiveMQMetricsPlugin init(Map<String, String> options) {
        for (String key : new String[] {"bind", "port", "key-store-path", "jaas-domain", "role"}) {
            if (options.get(key) == null || options.get(key).isEmpty()) {
                throw new IllegalArgumentException("continuity metrics plugin: the property " + key + " is required");
            }
        }
        this.options = Map.copyOf(options);
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        this.certificateExpiry = MultiGauge.builder("artemis.tls.certificate.expiry.timestamp")
                .description("When a certificate the broker loaded as it started stops being valid (Unix time)")
                .baseUnit("seconds")
                .register(registry);
        return this;
    }

    @Override
    public MeterRegistry getRegistry() {
        return registry;
    }

    // Called during every start of the server, also when an HA broker restarts in the same JVM: the endpoint is
    // opened once, on a thread of its own so that it never delays or fails the broker's start (a port still taken is
    // retried), and follows the current server.
    @Override
    public synchronized void registered(ActiveMQServer server) {
        broker = server;
        registerConnectionGauges(server);
        registerHealthGauges(server);
        registerCertificateExpiry(server);
        if (opener == null) {
            opener = new Thread(this::openEndpoint, "continuity-metrics-open");
            opener.setDaemon(true);
            opener.start();
        }
    }

    private void openEndpoint() {
        while (true) {
            try {
                startEndpoint();
                LOG.info("continuity metrics plugin: serving https://{}:{}/metrics", options.get("bind"),
                        options.get("port"));
                return;
            } catch (Exception e) {
                LOG.error("continuity metrics plugin: cannot serve on {}:{} (retrying in 30 s): {}", options.get("bind"),
                        options.get("port"), e.toString());
            }
            try {
                Thread.sleep(30_000);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    // The broker's AMQP connections (the mirrors): Artemis registers no meter for them. They start after the plugin
    // is registered, so each scrape adds those not yet seen.
    private synchronized void registerConnectionGauges(ActiveMQServer server) {
        server.getBrokerConnections().forEach(connection -> {
            String name = connection.getName();
            if (connectionGauges.add(name)) {
                Gauge.builder("artemis.broker.connection.connected", this, plugin -> plugin.connected(name))
                        .description("1 while the broker connection (AMQP mirror) is connected to its peer")
                        .tag("broker", server.getConfiguration().getName())
                        .tag("connection", name)
                        .register(registry);
            }
        });
    }

    // What the brokers' health alerts compare Artemis's own meters with: the disk usage at which the broker blocks
    // producers (artemis_disk_store_usage is a share of the disk too), and whether the broker is one of an HA pair
    // replicating its journal (artemis_replica_sync means something only then). Read from the current server, so
    // that the gauges follow an HA broker that restarts in the same JVM.
    private void registerHealthGauges(ActiveMQServer server) {
        String name = server.getConfiguration().getName();
        Gauge.builder("artemis.disk.store.usage.limit", this, plugin -> plugin.diskUsageLimit())
                .description("The share of the disk above which the broker blocks producers (max-disk-usage; NaN: never)")
                .tag("broker", name)
                .register(registry);
        Gauge.builder("artemis.ha.journal.replication", this, plugin -> plugin.replicatesJournal())
                .description("1 when the broker is the primary or the backup of an HA pair replicating its journal")
                .tag("broker", name)
                .register(registry);
    }

    private double diskUsageLimit() {
        ActiveMQServer current = broker;
        if (current == null || current.getConfiguration().getMaxDiskUsage() < 0) {
            return Double.NaN;
        }
        return current.getConfiguration().getMaxDiskUsage() / 100.0;
    }

    private double replicatesJournal() {
        ActiveMQServer current = broker;
        if (current == null || current.getConfiguration().getHAPolicyConfiguration() == null) {
            return 0;
        }
        return current.getConfiguration().getHAPolicyConfiguration().getType().name().startsWith("REPLICATION_") ? 1 : 0;
    }

    // Read as the broker starts, as its acceptors and web server read their key store and trust bundle: what it
    // serves until its next start, whatever the files become meanwhile.
    private synchronized void registerCertificateExpiry(ActiveMQServer server) {
        List<MultiGauge.Row<?>> rows = new ArrayList<>();
        for (String file : options.getOrDefault("certificates", "").split(",")) {
            if (file.isBlank()) {
                continue;
            }
            try {
                for (X509Certificate certificate : readCertificates(Path.of(file))) {
                    Tags tags = Tags.of("broker", server.getConfiguration().getName(),
                            "file", Path.of(file).getFileName().toString(),
                            "subject", certificate.getSubjectX500Principal().getName(),
                            "serial", certificate.getSerialNumber().toString(16));
                    rows.add(MultiGauge.Row.of(tags, certificate.getNotAfter().getTime() / 1000.0));
                }
            } catch (IOException | CertificateException | IllegalArgumentException e) {
                LOG.error("continuity metrics plugin: cannot read the certificates of {}: {}", file, e.toString());
            }
        }
        certificateExpiry.register(rows, true);
    }

    private static List<X509Certificate> readCertificates(Path file) throws IOException, CertificateException {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        List<X509Certificate> certificates = new ArrayList<>();
        Matcher block = PEM_CERTIFICATE.matcher(Files.readString(file, StandardCharsets.US_ASCII));
        while (block.find()) {
            byte[] der = Base64.getMimeDecoder().decode(block.group(1));
            certificates.add((X509Certificate) factory.generateCertificate(new ByteArrayInputStream(der)));
        }
        return certificates;
    }

    private double connected(String name) {
        ActiveMQServer current = broker;
        if (current == null) {
            return 0;
        }
        return current.getBrokerConnections().stream()
                .anyMatch(connection -> name.equals(connection.getName()) && connection.isConnected()) ? 1 : 0;
    }

    private void startEndpoint() throws Exception {
        KeyStore keyStore = KeyStore.getInstance("PEM", new de.dentrassi.crypto.pem.PemKeyStoreProvider());
        try (InputStream in = new FileInputStream(options.get("key-store-path"))) {
            keyStore.load(in, new char[0]);
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(keyStore, new char[0]);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keys.getKeyManagers(), null, null);

        HttpsServer server = HttpsServer.create(
                new InetSocketAddress(options.get("bind"), Integer.parseInt(options.get("port"))), 16);
        server.setHttpsConfigurator(new HttpsConfigurator(tls));
        ClassLoader loader = PrometheusMetricsPlugin.class.getClassLoader();
        ExecutorService threads = Executors.newFixedThreadPool(2, task -> {
            Thread thread = new Thread(task, "continuity-metrics");
            thread.setDaemon(true);
            // JAAS loads the broker's login modules through the context class loader.
            thread.setContextClassLoader(loader);
            return thread;
        });
        server.setExecutor(threads);
        server.createContext("/metrics", this::scrape).setAuthenticator(new JaasBasicAuthenticator(
                options.get("jaas-domain"), options.get("role")));
        server.start();
    }

    private void scrape(HttpExchange exchange) throws IOException {
        try (exchange) {
            if (!"GET".equals(exchange.getRequestMethod())) {
                exchange.sendResponseHeaders(405, -1);
                return;
            }
            ActiveMQServer current = broker;
            if (current != null) {
                registerConnectionGauges(current);
            }
            byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        } catch (RuntimeException e) {
            LOG.warn("continuity metrics plugin: scrape failed", e);
            throw e;
        }
    }

    /** Basic credentials checked by a JAAS login in the broker's domain; only holders of `role` get in. */
    private static final class JaasBasicAuthenticator extends BasicAuthenticator {
        private final String domain;
        private final String role;

        JaasBasicAuthenticator(String domain, String role) {
            super("artemis-metrics", StandardCharsets.UTF_8);
            this.domain = domain;
            this.role = role;
        }

        @Override
        public boolean checkCredentials(String user, String password) {
            Subject subject = new Subject();
            try {
                LoginContext login = new LoginContext(domain, subject, callbacks -> {
                    for (Callback callback : callbacks) {
                        if (callback instanceof NameCallback) {
                            ((NameCallback) callback).setName(user);
                        } else if (callback instanceof PasswordCallback) {
                            ((PasswordCallback) callback).setPassword(password.toCharArray());
                        } else {
                            throw new UnsupportedCallbackException(callback);
                        }
                    }
                });
                login.login();
                boolean allowed = false;
                for (Principal principal : subject.getPrincipals()) {
                    if (ROLE_PRINCIPAL.equals(principal.getClass().getName()) && role.equals(principal.getName())) {
                        allowed = true;
                    }
                }
                login.logout();
                return allowed;
            } catch (LoginException e) {
                return false;
            }
        }
    }
}
