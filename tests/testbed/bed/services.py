"""The services the router runs for every datacentre, as a third site that partitions do not cut off: ZooKeeper
(`up --zookeeper`) for the brokers' lock managers, and OpenLDAP (`up --ldap`), LDAPS only with a CA of its own,
seeded with the directory users and the passwords of the inventory's secrets.yml.
"""
import base64
import hashlib
import secrets
import shutil
import socket
import time
from pathlib import Path

from .config import (
    LDAP_DIR, LDAP_PORT, LDAP_SUFFIX, LDAP_USERS, LOG_DIR, ROUTER_IP, ROUTER_NS, STATE_DIR, ZOOKEEPER_CLASSPATH,
    ZOOKEEPER_PORT, TestbedError,
)
from .helpers import sh, write_file
from .inventory import load_vars
from .processes import cmdline, procs_in_netns, spawn


def start_zookeeper():
    if not Path("/usr/share/java/zookeeper.jar").is_file():
        raise TestbedError("ZooKeeper is missing: install Debian's `zookeeper` package (make setup does)")
    data = STATE_DIR / "zookeeper"
    shutil.rmtree(data, ignore_errors=True)
    config = data / "zoo.cfg"
    write_file(config, "\n".join([
        "tickTime=1000", f"dataDir={data / 'data'}", f"clientPort={ZOOKEEPER_PORT}",
        f"clientPortAddress={ROUTER_IP}", "admin.enableServer=false", "4lw.commands.whitelist=ruok", ""]))
    spawn(["ip", "netns", "exec", ROUTER_NS, "java", "-Xmx128m", "-cp", ZOOKEEPER_CLASSPATH,
           "org.apache.zookeeper.server.ZooKeeperServerMain", config], "zookeeper.log")
    deadline = time.time() + 30
    while True:
        try:
            with socket.create_connection((ROUTER_IP, ZOOKEEPER_PORT), timeout=2) as conn:
                conn.sendall(b"ruok")
                if conn.recv(4) == b"imok":
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise TestbedError(f"ZooKeeper did not start (see {LOG_DIR / 'zookeeper.log'})")
        time.sleep(0.3)


def _ssha(password):
    salt = secrets.token_bytes(8)
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()


def _ldap_certificates():
    """The directory's CA and its server certificate (for the router's address), made once per `up`."""
    ca_key, ca, key, csr, cert = (LDAP_DIR / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
       "-subj", "/CN=continuity testbed directory CA", "-keyout", ca_key, "-out", ca, capture=True)
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-subj", f"/CN={ROUTER_IP}", "-keyout", key, "-out", csr, capture=True)
    extensions = LDAP_DIR / "server.ext"
    write_file(extensions, f"subjectAltName=IP:{ROUTER_IP}\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "30",
       "-extfile", extensions, "-out", cert, capture=True)
    ca_key.unlink()
    return ca, cert, key


def _ldap_seed(passwords):
    """The directory's entries: people, groups (groupOfNames, member = a person's DN) and the brokers' bind user."""
    entries = [
        f"dn: {LDAP_SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: testbed\no: testbed",
        *(f"dn: ou={ou},{LDAP_SUFFIX}\nobjectClass: organizationalUnit\nou: {ou}"
          for ou in ("people", "groups", "services")),
        f"dn: cn=artemis,ou=services,{LDAP_SUFFIX}\nobjectClass: person\ncn: artemis\nsn: artemis\n"
        f"userPassword: {_ssha(passwords['bind'])}",
    ]
    for uid in LDAP_USERS:
        entries.append(f"dn: uid={uid},ou=people,{LDAP_SUFFIX}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\n"
                       f"sn: {uid}\nuserPassword: {_ssha(passwords[uid])}")
    for group in sorted({g for groups in LDAP_USERS.values() for g in groups}):
        members = "".join(f"\nmember: uid={uid},ou=people,{LDAP_SUFFIX}" for uid, groups in LDAP_USERS.items()
                          if group in groups)
        entries.append(f"dn: cn={group},ou=groups,{LDAP_SUFFIX}\nobjectClass: groupOfNames\ncn: {group}{members}")
    return "\n\n".join(entries) + "\n"


def prepare_ldap():
    """The directory's certificates and configuration (before the inventory, which carries its CA)."""
    if not Path("/usr/sbin/slapd").is_file():
        raise TestbedError("slapd is missing: install Debian's `slapd` package (make setup does)")
    shutil.rmtree(LDAP_DIR, ignore_errors=True)
    (LDAP_DIR / "data").mkdir(parents=True)
    ca, cert, key = _ldap_certificates()
    write_file(LDAP_DIR / "slapd.conf", "\n".join([
        *(f"include /etc/ldap/schema/{name}.schema" for name in ("core", "cosine", "inetorgperson")),
        f"pidfile {LDAP_DIR / 'slapd.pid'}", "modulepath /usr/lib/ldap", "moduleload back_mdb",
        f"TLSCACertificateFile {ca}", f"TLSCertificateFile {cert}", f"TLSCertificateKeyFile {key}",
        "disallow bind_anon", "require authc",
        "database mdb", f"suffix {LDAP_SUFFIX}", f"directory {LDAP_DIR / 'data'}", "maxsize 104857600",
        # The brokers' bind user reads everything but passwords; a person reads its own entry; binding needs auth.
        "access to attrs=userPassword by self =xw by anonymous auth by * none",
        f"access to * by dn.exact=cn=artemis,ou=services,{LDAP_SUFFIX} read by self read by * none", ""]))


def start_ldap(inv):
    """slapd on the router, LDAPS only, seeded with LDAP_USERS and the passwords of the inventory's secrets.yml."""
    secrets_file = load_vars(inv / "group_vars" / "all" / "secrets.yml")
    passwords = {"bind": secrets_file["testbed_ldap_bind_password"], **secrets_file["testbed_ldap_passwords"]}
    seed = LDAP_DIR / "seed.ldif"
    write_file(seed, _ldap_seed(passwords), 0o600)
    sh("slapadd", "-f", LDAP_DIR / "slapd.conf", "-l", seed, capture=True)
    seed.unlink()
    ldap_start()


def ldap_start():
    spawn(["ip", "netns", "exec", ROUTER_NS, "/usr/sbin/slapd", "-d", "0", "-f", LDAP_DIR / "slapd.conf",
           "-h", f"ldaps://{ROUTER_IP}:{LDAP_PORT}/"], "slapd.log")
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection((ROUTER_IP, LDAP_PORT), timeout=2).close()
            return
        except OSError:
            if time.time() > deadline:
                raise TestbedError(f"slapd did not start (see {LOG_DIR / 'slapd.log'})") from None
            time.sleep(0.2)


def ldap_pids():
    return [pid for pid in procs_in_netns(ROUTER_NS) if cmdline(pid)[:1] == [b"/usr/sbin/slapd"]]
