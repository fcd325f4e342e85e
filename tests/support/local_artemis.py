"""Throw-away Apache Artemis brokers on loopback, for tests.

Creates broker instances from an unpacked Artemis distribution
(``ARTEMIS_HOME``) with ``bin/artemis create``, rewrites the generated
configuration to use the ports we chose, optionally adds an AMQP mirror broker
connection and extra users, and starts/stops the broker as a child process.

This is test scaffolding: it is for a developer's machine or CI, never for
real deployments (plain-text passwords, NIO journal, no TLS).
"""

from __future__ import annotations

import atexit
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import MIRROR_QUEUE_PREFIX
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, broker_mbean)

from . import amqp

#: every permission type Artemis knows (security-settings)
ALL_PERMISSIONS = (
    "send", "consume", "browse", "createAddress", "deleteAddress",
    "createDurableQueue", "deleteDurableQueue", "createNonDurableQueue",
    "deleteNonDurableQueue", "manage", "view", "edit",
)

#: All the mirror user on a mirror *target* needs (found by trial on 2.56.0):
#: ``send`` on the address ``$ACTIVEMQ_ARTEMIS_MIRROR_<connection name>``. The
#: target creates/deletes mirrored addresses and queues and routes messages
#: and acks internally, without checking the mirror user's permissions.
MIRROR_TARGET_PERMISSIONS = ("send",)


_RUNNING: "weakref.WeakSet[LocalBroker]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Don't leave brokers running when the test process exits without stopping them."""
    for broker in list(_RUNNING):
        broker.kill()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now.

    Chosen at random below Linux's ephemeral range (32768-60999 by default),
    so that outgoing connections made before the broker binds it cannot take
    it as their source port. Someone else may still take it in the meantime.
    """
    for _attempt in range(100):
        port = random.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def find_artemis_home() -> Path | None:
    """``$ARTEMIS_HOME`` if it points at an unpacked distribution, else None."""
    value = os.environ.get("ARTEMIS_HOME")
    if not value:
        return None
    home = Path(value)
    return home if (home / "bin" / "artemis").is_file() else None


@dataclass
class Mirror:
    """An AMQP mirror broker connection from this broker to ``uri``."""

    name: str
    uri: str
    user: str
    password: str
    retry_interval: int = 1000
    message_acknowledgements: bool = True
    queue_creation: bool = True
    queue_removal: bool = True

    def xml(self) -> str:
        def flag(value: bool) -> str:
            return "true" if value else "false"

        return (
            "      <broker-connections>\n"
            f"         <amqp-connection uri={quoteattr(self.uri)} name={quoteattr(self.name)}"
            f" user={quoteattr(self.user)} password={quoteattr(self.password)}"
            f" retry-interval=\"{self.retry_interval}\" reconnect-attempts=\"-1\">\n"
            f"            <mirror message-acknowledgements=\"{flag(self.message_acknowledgements)}\""
            f" queue-creation=\"{flag(self.queue_creation)}\""
            f" queue-removal=\"{flag(self.queue_removal)}\"/>\n"
            "         </amqp-connection>\n"
            "      </broker-connections>\n"
        )


@dataclass(eq=False)
class LocalBroker:
    """One broker instance under ``instance_dir`` listening on 127.0.0.1.

    ``amqp_port`` carries AMQP and CORE; ``http_port`` is the web server
    (Jolokia at ``/console/jolokia``). The admin user has role ``amq``.
    """

    home: Path
    instance_dir: Path
    name: str
    admin_user: str = "admin"
    admin_password: str = "admin-secret"
    amqp_port: int = 0
    http_port: int = 0
    java_memory: str = "512m"
    mirrors: list[Mirror] = field(default_factory=list)
    #: user -> (password, [roles])
    extra_users: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    #: (match, role, permissions): extra grants. For match "#" the role is
    #: added to the catch-all setting; other matches get their own
    #: security-setting (which then is the only one that applies there).
    extra_security: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    process: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.home = Path(self.home)
        self.instance_dir = Path(self.instance_dir)
        self.amqp_port = self.amqp_port or free_port()
        self.http_port = self.http_port or free_port()

    # -- addresses ------------------------------------------------------------

    @property
    def amqp_url(self) -> str:
        return f"amqp://127.0.0.1:{self.amqp_port}"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def etc(self) -> Path:
        return self.instance_dir / "etc"

    @property
    def log_file(self) -> Path:
        return self.instance_dir / "console.log"

    # -- creation -------------------------------------------------------------

    def create(self) -> "LocalBroker":
        """Run ``artemis create`` and rewrite its configuration (idempotent: an
        existing instance directory is replaced)."""
        if self.instance_dir.exists():
            shutil.rmtree(self.instance_dir)
        self.instance_dir.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(self.home / "bin" / "artemis"), "create", "--silent", "--force",
            "--user", self.admin_user, "--password", self.admin_password, "--role", "amq",
            "--require-login", "--name", self.name,
            "--host", "127.0.0.1", "--http-host", "127.0.0.1",
            "--http-port", str(self.http_port), "--default-port", str(self.amqp_port),
            "--java-memory", self.java_memory,
            "--nio", "--no-autotune",
            "--no-amqp-acceptor", "--no-hornetq-acceptor", "--no-mqtt-acceptor",
            "--no-stomp-acceptor",
            str(self.instance_dir),
        ]
        result = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise RuntimeError(f"artemis create failed ({result.returncode}):\n"
                               f"{result.stdout}\n{result.stderr}")
        self.configure()
        return self

    def configure(self) -> None:
        broker_xml = self.etc / "broker.xml"
        text = broker_xml.read_text()
        acceptor = (
            f'         <acceptor name="artemis">tcp://127.0.0.1:{self.amqp_port}?'
            "protocols=AMQP,CORE;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;"
            "amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true;"
            "tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576</acceptor>\n"
        )
        text, n = re.subn(r"<acceptors>.*?</acceptors>",
                          "<acceptors>\n" + acceptor + "      </acceptors>", text, flags=re.S)
        if n != 1:
            raise RuntimeError(f"no <acceptors> in {broker_xml}")
        # a nearly full disk on a CI machine must not block producers
        text = re.sub(r"<max-disk-usage>\d+</max-disk-usage>",
                      "<max-disk-usage>100</max-disk-usage>", text)
        extra = ""
        for mirror in self.mirrors:
            extra += mirror.xml()
        if extra:
            text = text.replace("      <security-settings>", extra + "\n      <security-settings>", 1)
        for match, role, permissions in self.extra_security:
            text = self._grant(text, match, role, permissions)
        broker_xml.write_text(text)

        # artemis create writes -Xms512M whatever --java-memory says; a smaller
        # -Xmx then stops the JVM ("Initial heap size set to a larger value
        # than the maximum heap size")
        profile = self.etc / "artemis.profile"
        profile.write_text(re.sub(r"-Xms\S+", "-Xms64M", profile.read_text(), count=1))

        bootstrap = self.etc / "bootstrap.xml"
        btext = bootstrap.read_text()
        btext, n = re.subn(r'uri="http://[^"]*"', f'uri="http://127.0.0.1:{self.http_port}"', btext)
        if n != 1:
            raise RuntimeError(f"no web binding uri in {bootstrap}")
        bootstrap.write_text(btext)

        for user, (password, roles) in self.extra_users.items():
            self._append_line(self.etc / "artemis-users.properties", f"{user} = {password}")
            roles_file = self.etc / "artemis-roles.properties"
            for role in roles:
                self._add_role_member(roles_file, role, user)

    @staticmethod
    def _grant(text: str, match_string: str, role: str, permissions: tuple[str, ...]) -> str:
        """Grant ``permissions`` on ``match_string`` to ``role``.

        Artemis keeps one security-setting per match string (a second element
        with the same match replaces the first), so an existing setting gets
        the role added to each permission's role list.
        """
        pattern = rf'(<security-setting match={re.escape(quoteattr(match_string))}>\n)(.*?)(\s*</security-setting>)'
        match = re.search(pattern, text, re.S)
        if not match:
            lines = "".join(f'            <permission type="{p}" roles="{role}"/>\n'
                            for p in permissions)
            block = (f"         <security-setting match={quoteattr(match_string)}>\n{lines}"
                     "         </security-setting>\n")
            return text.replace("      <security-settings>\n", "      <security-settings>\n" + block, 1)
        body = match.group(2)
        present = re.findall(r'type="(\w+)"', body)
        for permission in permissions:
            if permission in present:
                body = re.sub(rf'(<permission type="{permission}" roles=")([^"]*)"',
                              lambda m: f'{m.group(1)}{m.group(2)},{role}"', body)
            else:
                body += f'\n            <permission type="{permission}" roles="{role}"/>'
                present.append(permission)
        return text[:match.start(2)] + body + text[match.end(2):]

    @staticmethod
    def _append_line(path: Path, line: str) -> None:
        # the files artemis create writes end without a newline
        content = path.read_text()
        if content and not content.endswith("\n"):
            content += "\n"
        path.write_text(content + line + "\n")

    @classmethod
    def _add_role_member(cls, path: Path, role: str, user: str) -> None:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            key, sep, value = line.partition("=")
            if sep and not line.lstrip().startswith("#") and key.strip() == role:
                members = [m.strip() for m in value.split(",") if m.strip()]
                if user not in members:
                    members.append(user)
                lines[i] = f"{role} = {','.join(members)}"
                path.write_text("\n".join(lines) + "\n")
                return
        cls._append_line(path, f"{role} = {user}")

    # -- running --------------------------------------------------------------

    def start(self) -> "LocalBroker":
        if self.process is not None and self.process.poll() is None:
            return self
        log = open(self.log_file, "ab")
        try:
            self.process = subprocess.Popen(
                [str(self.instance_dir / "bin" / "artemis"), "run"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.instance_dir, start_new_session=True)
        finally:
            log.close()
        _RUNNING.add(self)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until AMQP, Jolokia and the broker itself answer."""
        def ready():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker {self.name} exited with {self.process.returncode}; "
                                   f"log tail:\n{self.log_tail()}")
            with socket.create_connection(("127.0.0.1", self.amqp_port), timeout=1):
                pass
            return self.management(timeout=2).read(broker_mbean(self.name), "Started")
        try:
            amqp.wait_for(ready, timeout=timeout, interval=0.25,
                          description=f"broker {self.name} to start")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlog tail:\n{self.log_tail()}") from None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop cleanly (SIGTERM runs Artemis's shutdown hook); SIGKILL if it hangs."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def kill(self) -> None:
        """Crash the broker (SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- convenience ------------------------------------------------------------

    def management(self, timeout: int = 10) -> ArtemisManagement:
        """The collection's management client for this broker, as its administrator."""
        return ArtemisManagement(self.name, self.management_url, self.admin_user, self.admin_password,
                                 timeout=timeout)

    def queue_message_count(self, address: str, queue: str | None = None) -> int:
        return self.management().message_count(address, queue or address)

    def queue_names(self) -> list[str]:
        return self.management().queue_names()


def mirrored_pair(home: Path, base_dir: Path, *, mirror_user: str = "mirror",
                  mirror_password: str = "mirror-secret",
                  mirror_permissions: tuple[str, ...] = MIRROR_TARGET_PERMISSIONS,
                  mirror_match: str | None = None,
                  connection_name: str = "to-b",
                  admin_password: str = "admin-secret") -> tuple[LocalBroker, LocalBroker]:
    """Two created (not started) brokers: ``a`` mirrors to ``b``.

    ``b`` has a user ``mirror_user`` in role ``mirror`` holding
    ``mirror_permissions`` on ``mirror_match`` (default: only the address
    ``$ACTIVEMQ_ARTEMIS_MIRROR_<connection_name>``); ``a`` connects as that
    user.
    """
    match = mirror_match or MIRROR_QUEUE_PREFIX + connection_name
    b = LocalBroker(home, Path(base_dir) / "broker-b", "broker-b", admin_password=admin_password,
                    extra_users={mirror_user: (mirror_password, ["mirror"])},
                    extra_security=[(match, "mirror", tuple(mirror_permissions))])
    a = LocalBroker(home, Path(base_dir) / "broker-a", "broker-a", admin_password=admin_password,
                    mirrors=[Mirror(connection_name, f"tcp://127.0.0.1:{b.amqp_port}",
                                    mirror_user, mirror_password)])
    b.create()
    a.create()
    return a, b
