"""The brokers' health alerts, end to end: a 2 x 2 shared_nothing estate serving its metrics, a real Prometheus (the
Debian package) scraping every broker in the job `artemis` every 5 s and evaluating the shipped broker rules
(roles/rpo_job/files/prometheus/continuity_artemis_brokers.rules.yml). Then, together: dc2's backup killed (the
broker down, and its pair's backup out of sync), an address of dc1 forced into paging (its own 20 KB limit), dc1's
dead-letter queue filled, and dc1's backup restarted on a certificate that ends in 5 days. Each alert must be firing
in Prometheus's alerts API within its `for` plus a minute; nothing fires before the faults. The figures go to
tests/drills/results/broker_health_alerts.json.

    make drills            (or: pytest tests/drills/test_broker_health_alerts.py)
"""

import datetime
import json
import os
import time
import urllib.request

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from support import amqp_clients as amqp
from support import prometheus
from support.estate import REPO_ROOT, TESTBED_STATE_DIR, Estate, layout_inventory, run_playbook

pytestmark = pytest.mark.timeout(3600)

RESULTS = os.path.join(REPO_ROOT, "tests", "drills", "results")
RULES = os.path.join(REPO_ROOT, "roles", "rpo_job", "files", "prometheus", "continuity_artemis_brokers.rules.yml")
PAGING_ADDRESS = "drill.paging"
# Each alert's `for` in the rules, and a minute more for the scrape, the evaluation and the fault taking effect.
BOUND_S = {"ContinuityArtemisBrokerDown": 60 + 60, "ContinuityArtemisBackupOutOfSync": 120 + 60,
           "ContinuityArtemisAddressPaging": 300 + 60, "ContinuityArtemisDeadLettersGrowing": 60,
           "ContinuityArtemisCertificateExpiring": 60, "ContinuityArtemisCertificateExpiresSoon": 60}


@pytest.fixture(scope="module")
def estate_with_metrics(tmp_path_factory):
    Estate.testbed("down")
    Estate.testbed("up", "--dcs", "2", "--nodes-per-dc", "2", "--metrics")
    try:
        inventory = layout_inventory(tmp_path_factory.mktemp("health"), "shared_nothing")
        built = run_playbook("site.yml", inventory=inventory)
        assert built.rc == 0, built.output[-6000:]
        yield Estate.from_testbed()
    finally:
        if os.environ.get("KEEP_TESTBED") != "1":
            Estate.testbed("down")


def _alerts(url):
    with urllib.request.urlopen(f"{url}/api/v1/alerts", timeout=10) as reply:
        return json.load(reply)["data"]["alerts"]


def _firing(url):
    return [alert["labels"] for alert in _alerts(url) if alert["state"] == "firing"]


def _matches(labels, name, wanted):
    return labels["alertname"] == name and all(labels.get(key) == value for key, value in wanted.items())


def _certificate_ending_in(days, node):
    """The node's broker certificate issued again by the test bed's CA with the same key, names and extensions, ending
    ``days`` from now: PEM of the key and the certificate, as broker.pem holds them."""
    pki = os.path.join(TESTBED_STATE_DIR, "pki")
    with open(os.path.join(pki, "ca.pem"), "rb") as handle:
        ca = x509.load_pem_x509_certificate(handle.read())
    with open(os.path.join(pki, "ca.key"), "rb") as handle:
        ca_key = serialization.load_pem_private_key(handle.read(), password=None)
    with open(os.path.join(pki, f"{node.name}.pem"), "rb") as handle:
        current = x509.load_pem_x509_certificate(handle.read())
    with open(os.path.join(pki, f"{node.name}.key"), "rb") as handle:
        key_pem = handle.read()
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(current.subject).issuer_name(ca.subject)
               .public_key(current.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days)))
    for extension in current.extensions:
        if extension.oid not in (x509.ExtensionOID.AUTHORITY_KEY_IDENTIFIER,):
            builder = builder.add_extension(extension.value, extension.critical)
    certificate = builder.sign(ca_key, hashes.SHA256())
    return key_pem + certificate.public_bytes(serialization.Encoding.PEM), certificate


def test_the_brokers_health_alerts_fire_on_the_faults_they_name(estate_with_metrics, tmp_path):
    estate = estate_with_metrics
    dc1_primary, dc1_backup = [node for node in estate.nodes if node.dc == "dc1"]
    dc2_primary, dc2_backup = [node for node in estate.nodes if node.dc == "dc2"]
    targets = [node.metrics_url.removeprefix("https://").removesuffix("/metrics") for node in estate.nodes]
    scrape = {"job_name": "artemis", "scheme": "https", "tls_config": {"ca_file": dc1_primary.ca_cert},
              "basic_auth": {"username": dc1_primary.monitor_user, "password": dc1_primary.monitor_password},
              "static_configs": [{"targets": targets}]}
    figures = {"drill": "broker_health_alerts", "estate": "2x2 shared_nothing", "scrape_interval_s": 5,
               "rule_interval_s": 5, "alerts": []}
    with prometheus.server(tmp_path, [scrape], interval_s=5, rule_files=[RULES]) as url:
        amqp.wait_for(lambda: prometheus.query(url, 'up{job="artemis"} == 1'),
                      lambda result: len(result) == len(targets), timeout=120,
                      description="Prometheus scraping every broker")
        amqp.wait_for(lambda: prometheus.query(url, "artemis_replica_sync == 1 and artemis_active == 1"),
                      lambda result: len(result) == 2, timeout=120, description="both pairs in sync")
        time.sleep(30)
        assert _firing(url) == [], "alerts firing before any fault"

        faults = {}
        # The backup of dc2 killed: it is down, and dc2's live broker has no backup in sync.
        estate.testbed("kill", dc2_backup.name)
        faults["ContinuityArtemisBrokerDown"] = faults["ContinuityArtemisBackupOutOfSync"] = time.time()

        # An address of its own limited to 20 KB, paging after the first few messages.
        management = dc1_primary.management()
        management.execute('org.apache.activemq.artemis:broker="%s"' % dc1_primary.name,
                           "addAddressSettings(java.lang.String,java.lang.String)", PAGING_ADDRESS,
                           json.dumps({"maxSizeBytes": 20480, "pageSizeBytes": 10240, "addressFullMessagePolicy": "PAGE"}))
        amqp.send(dc1_primary.amqp_url, dc1_primary.admin_user, dc1_primary.admin_password, PAGING_ADDRESS,
                  ["x" * 1024] * 100, id_prefix="paging", ca_path=dc1_primary.ca_cert)
        faults["ContinuityArtemisAddressPaging"] = time.time()

        amqp.send(dc1_primary.amqp_url, dc1_primary.admin_user, dc1_primary.admin_password, "DLQ", 5,
                  id_prefix="dead", ca_path=dc1_primary.ca_cert)
        faults["ContinuityArtemisDeadLettersGrowing"] = time.time()

        # dc1's backup restarted on a certificate that ends in 5 days (the plugin reads the certificates at start).
        pem, certificate = _certificate_ending_in(5, dc1_backup)
        broker_pem = f"/var/opt/artemis/{dc1_backup.name}/etc/tls/broker.pem"
        estate.exec(dc1_backup.name, "sh", "-c", f"cat > {broker_pem} <<'EOF'\n{pem.decode()}EOF\n")
        estate.testbed("kill", dc1_backup.name)
        estate.exec(dc1_backup.name, "sh", "-c",
                    f"rm -f /var/opt/artemis/{dc1_backup.name}/data/artemis.pid && runuser -u artemis -- "
                    f"/var/opt/artemis/{dc1_backup.name}/bin/artemis-service start")
        faults["ContinuityArtemisCertificateExpiring"] = faults["ContinuityArtemisCertificateExpiresSoon"] = time.time()

        expected = {
            "ContinuityArtemisBrokerDown": {"instance": dc2_backup.metrics_url.split("/")[2]},
            "ContinuityArtemisBackupOutOfSync": {"broker": dc2_primary.name},
            "ContinuityArtemisAddressPaging": {"broker": dc1_primary.name, "address": PAGING_ADDRESS},
            "ContinuityArtemisDeadLettersGrowing": {"broker": dc1_primary.name, "queue": "DLQ"},
            "ContinuityArtemisCertificateExpiring": {"broker": dc1_backup.name, "file": "broker.pem",
                                                     "serial": f"{certificate.serial_number:x}"},
        }
        expected["ContinuityArtemisCertificateExpiresSoon"] = expected["ContinuityArtemisCertificateExpiring"]
        fired = {}
        deadline = min(faults.values()) + max(BOUND_S.values()) + 30
        while set(fired) != set(expected) and time.time() < deadline:
            for labels in _firing(url):
                name = labels["alertname"]
                if name in expected and name not in fired and _matches(labels, name, expected[name]):
                    fired[name] = round(time.time() - faults[name], 1)
            time.sleep(1)
        # Firing, and none of the expected: only the dead letters mirrored to dc2's live broker may be (its DLQ grows
        # too); another broker down or out of sync, or a disk or address alert, would be a false page.
        allowed = list(expected.items()) + [("ContinuityArtemisDeadLettersGrowing",
                                             {"broker": dc2_primary.name, "queue": "DLQ"})]
        unexpected = sorted(str(labels) for labels in _firing(url)
                            if not any(_matches(labels, name, wanted) for name, wanted in allowed))

    for name in expected:
        figures["alerts"].append({"alert": name, "labels": expected[name], "firing_after_s": fired.get(name),
                                  "bound_s": BOUND_S[name]})
    figures["also_firing"] = unexpected
    figures["measured_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "broker_health_alerts.json"), "w") as handle:
        json.dump(figures, handle, indent=2)
        handle.write("\n")
    assert set(fired) == set(expected), f"not firing: {sorted(set(expected) - set(fired))}; figures: {figures}"
    assert all(fired[name] <= BOUND_S[name] for name in fired), figures
    assert unexpected == [], f"also firing: {unexpected}"
