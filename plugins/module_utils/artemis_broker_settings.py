# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the broker role checks of its own settings before it changes anything: the values the argument specs cannot
judge alone (sizes, paths, JVM options, login modules, logging, ports that clash, names Artemis refuses).

`settings_errors` takes the role's variables by their names and returns one sentence per problem, each naming the
variable and what it got; the role's preflight fails with all of them at once. The rules between routing entries are
in artemis_broker_config.py, the client roles' in artemis_security.py.
"""

from __future__ import annotations

import re

from ansible.module_utils.compat.version import LooseVersion

MASKED = re.compile(r'^\s*ENC\(')
SIZE_IN_BYTES = re.compile(r'^[0-9]+[KMG]?$')
BYTE_UNITS = {'': 1, 'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3}
HEAP_SIZE = re.compile(r'^[0-9]+[kKmMgG]?\Z')
# One JVM option: artemis.profile's JAVA_ARGS is a double-quoted shell string split on blanks.
JVM_OPTION = re.compile(r'^-[A-Za-z0-9_.:+=,/@%-]+\Z')
# Artemis applies system properties with these prefixes to its configuration, past broker_properties' checks.
CONFIGURING_OPTION = re.compile(r'^-D(brokerconfig|webconfig)[.]')
JAVA_HOME = re.compile(r'^/[A-Za-z0-9_.+/-]*\Z')
LOGIN_MODULES = ('properties', 'ldap')
LOGIN_FLAGS = ('required', 'requisite', 'sufficient', 'optional')
LDAPS_URL = re.compile(r'^ldaps://[^\s]+\Z')
# login.config's values are quoted strings in which JAAS expands ${...}.
LOGIN_CONFIG_UNSAFE = re.compile(r'[$][{]|[\x00-\x1f]')
LOG_LEVELS = ('OFF', 'FATAL', 'ERROR', 'WARN', 'INFO', 'DEBUG', 'TRACE', 'ALL')
LOGGER_NAME = re.compile(r'^[A-Za-z_$][A-Za-z0-9_$.-]*$')
# Written into log4j2.properties: no line break, and no $ (a log4j lookup).
LOG_DIR = re.compile(r'^/[^\x00-\x1f$\\]*\Z')
ROLLOVER_SIZE = re.compile(r'^([0-9]+ ?([KMG]B)?)?\Z')
FIREWALLD_ZONE = re.compile(r'^[A-Za-z0-9_-]*$')
SELINUX_TYPE = re.compile(r'^([a-z0-9_]+_t)?$')
PLAIN_NAME = re.compile(r'^[^\s#*]+$')
BROKER_PREFIX = re.compile(r'^(activemq\.|\$ACTIVEMQ_ARTEMIS)')
# The role's variables settings_errors reads (the preflight passes each by its name) and what it reads of the values the
# role derives from them.
SETTINGS = ('broker_admin_password', 'broker_monitor_password', 'broker_cluster_password', 'broker_users',
            'broker_peer_users', 'broker_user_hash_iterations', 'broker_ha', 'broker_certificate_users',
            'broker_journal_file_size', 'broker_java_max_heap', 'broker_java_min_heap', 'broker_java_gc_args',
            'broker_java_extra_args', 'broker_java_home', 'broker_login_modules', 'broker_ldap',
            'broker_global_max_size', 'broker_max_disk_usage', 'broker_log_levels', 'broker_log_dir',
            'broker_log_rollover_size', 'broker_log_rollover_keep', 'broker_version', 'broker_archive_sha512',
            'broker_metrics_enabled', 'broker_metrics_role', 'broker_firewalld_zone', 'broker_selinux_port_type',
            'broker_addresses', 'broker_queues')
DERIVED = ('defined', 'password_users', 'core_port', 'ports', 'acceptor_names', 'ldap_options', 'metrics_registry',
           'known_registries', 'has_certificate', 'minimum_version', 'known_checksums')
# The variables of the plain-text client acceptors, which broker_acceptors replaced.
REMOVED_VARIABLES = ('broker_client_tls', 'broker_client_tls_port', 'broker_client_amqps_port')


def _int(value, default=0):
    """A number as Jinja's int filter reads it: anything that is not one counts as `default`."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _size_in_bytes(text, pattern):
    match = pattern.match(text)
    if not match:
        return None
    unit = text[-1].upper() if text[-1].isalpha() else ''
    return int(text[:-1] if unit else text) * BYTE_UNITS[unit]


def _filled(value):
    return isinstance(value, str) and len(value) > 0


def secret_errors(admin_password, monitor_password, users):
    errors = []
    if not _filled(admin_password):
        errors.append("broker_admin_password must be set and not empty: there are no default passwords.")
    missing = [user.get('name') for user in users if not _filled(user.get('password'))]
    if missing:
        errors.append(f"the password of every entry in broker_users must be set, a string (quote one made of digits) "
                      f"and not empty: there are no default passwords (users without one: {missing}).")
    if not isinstance(monitor_password, str):
        errors.append("broker_monitor_password must be a string (empty for no monitoring user).")
    return errors


def masked_login_errors(passwords):
    """`passwords`: {variable: value} of the passwords the role itself logs in with."""
    masked = [name for name, value in passwords.items() if MASKED.match(str(value))]
    if not masked:
        return []
    return [f"{', '.join(masked)} cannot be masked (ENC(...)): the collection logs in with them and masks the cluster "
            "password itself. Keep them in Ansible Vault; the passwords of broker_users may be given masked."]


def hash_iteration_errors(iterations):
    if _int(iterations) >= 1024:
        return []
    return [f"broker_user_hash_iterations must be at least 1024, Artemis's own (got {iterations})."]


def ha_errors(ha, cluster_password, core_port):
    if ha.get('policy', 'none') == 'none':
        return []
    if _filled(cluster_password) and str(core_port) and ha.get('peers'):
        return []
    return [f"broker_ha.policy {ha.get('policy')} needs broker_cluster_password (not empty), an acceptor in "
            "broker_acceptors that speaks CORE, and the pair's other broker in broker_ha.peers."]


def removed_variable_errors(defined):
    removed = [name for name in REMOVED_VARIABLES if name in defined]
    if not removed:
        return []
    return [f"{', '.join(removed)} no longer exist: the acceptors of broker_acceptors are TLS themselves unless one "
            "says tls: false (the defaults are artemis on 61616 and amqps on 5671, both TLS). Remove them, and write "
            "broker_acceptors as your clients need it."]


def certificate_user_errors(certificate_users, password_users):
    password_names = {user.get('name') for user in password_users}
    if all(isinstance(user.get('subject_pattern'), str) and user.get('name') not in password_names
           for user in certificate_users):
        return []
    return ["every entry of broker_certificate_users needs a name that no password user has and a subject_pattern "
            "(a Java regular expression for the certificate's subject), got "
            f"{[user.get('name') for user in certificate_users]}."]


def journal_file_size_errors(size):
    text = str(size)
    size_in_bytes = _size_in_bytes(text, SIZE_IN_BYTES)
    if size_in_bytes is not None and BYTE_UNITS['M'] <= size_in_bytes <= BYTE_UNITS['G']:
        return []
    return [f"broker_journal_file_size must be a number of bytes with an optional K, M or G, from 1M to 1G "
            f"(got {text})."]


def jvm_errors(max_heap, min_heap, gc_args, extra_args, java_home):
    errors = []
    heaps = {'broker_java_max_heap': str(max_heap), 'broker_java_min_heap': str(min_heap)}
    sizes = {name: _size_in_bytes(value, HEAP_SIZE) for name, value in heaps.items()}
    unreadable = [f"{name} ({heaps[name]})" for name, size in sizes.items() if size is None]
    if unreadable:
        errors.append(f"{' and '.join(unreadable)} must be sizes like 512m or 2G.")
    elif sizes['broker_java_min_heap'] > sizes['broker_java_max_heap']:
        errors.append(f"broker_java_min_heap ({heaps['broker_java_min_heap']}) is above broker_java_max_heap "
                      f"({heaps['broker_java_max_heap']}).")
    options = [str(option) for option in list(gc_args) + list(extra_args)]
    refused = [option for option in options if not JVM_OPTION.match(option) or CONFIGURING_OPTION.match(option)]
    if refused:
        errors.append("every option of broker_java_gc_args and broker_java_extra_args must be one JVM option starting "
                      "with - and without blanks, quotes or $, and none of -Dbrokerconfig. or -Dwebconfig. (Artemis "
                      f"configures itself from those; use broker_properties) (refused: {refused}).")
    if java_home and not JAVA_HOME.match(str(java_home)):
        errors.append("broker_java_home must be an absolute path of letters, digits and . _ + - "
                      f"(got '{java_home}').")
    return errors


def login_errors(login_modules, ldap, ldap_options):
    """`ldap_options`: the LDAPLoginModule's options as login.config will hold them."""
    modules = [entry.get('module') for entry in login_modules]
    flags = [entry.get('flag') for entry in login_modules]
    with_ldap = 'ldap' in modules
    unsafe = sorted(key for key, value in ldap_options.items()
                    if isinstance(value, str) and LOGIN_CONFIG_UNSAFE.search(value)) if with_ldap else []
    wanted = [
        modules and all(module in LOGIN_MODULES for module in modules),
        all(flag in LOGIN_FLAGS for flag in flags),
        modules.count('properties') == 1 and modules.count('ldap') <= 1,
        not with_ldap or (modules[0] == 'properties' and flags[0] == 'sufficient'),
        not with_ldap or LDAPS_URL.match(str(ldap.get('url', ''))),
        not with_ldap or all(ldap.get(key) for key in ('user_base', 'role_base', 'bind_dn', 'bind_password')),
        not unsafe,
    ]
    if all(wanted):
        return []
    described = [{'module': module, 'flag': flag} for module, flag in zip(modules, flags)]
    return [f"broker_login_modules must name `properties` once and `ldap` at most once, each with a flag required, "
            f"requisite, sufficient or optional (got {described}); with `ldap`, `properties` comes first and is "
            "`sufficient` (the role's own users, the admin among them, must log in when the directory is down); "
            "broker_ldap needs url (ldaps://: the directory is reached over TLS only), user_base, role_base, bind_dn "
            f"and bind_password (no anonymous bind), and no value with a line break or ${{ (refused: {unsafe})."]


def capacity_errors(global_max_size, max_disk_usage):
    errors = []
    text = str(global_max_size)
    if text not in ('', '-1') and not SIZE_IN_BYTES.match(text):
        errors.append("broker_global_max_size must be empty, -1 or a number of bytes with an optional K, M or G "
                      f"(got {text}).")
    usage = _int(max_disk_usage)
    if usage != -1 and not 1 <= usage <= 100:
        errors.append(f"broker_max_disk_usage must be a percentage from 1 to 100, or -1 (got {max_disk_usage}).")
    return errors


def logging_errors(levels, log_dir, rollover_size, rollover_keep):
    errors = []
    bad_loggers = [str(name) for name in levels if not LOGGER_NAME.match(str(name))]
    # YAML reads an unquoted OFF as false.
    bad_levels = [f"{name}: {level}" for name, level in levels.items()
                  if not (level is False or (isinstance(level, str) and level.upper() in LOG_LEVELS))]
    if bad_loggers or bad_levels:
        errors.append("broker_log_levels must map logger names (a Java package or class, or root) to one of "
                      f"{', '.join(LOG_LEVELS)} (refused: {', '.join(bad_loggers + bad_levels)}).")
    if not LOG_DIR.match(str(log_dir)):
        errors.append(f"broker_log_dir must be an absolute path without a line break, a $ or a backslash "
                      f"(got '{log_dir}').")
    if not ROLLOVER_SIZE.match(str(rollover_size)):
        errors.append(f"broker_log_rollover_size must be empty or a size like 100MB (got '{rollover_size}').")
    if _int(rollover_keep, -1) < 0:
        errors.append(f"broker_log_rollover_keep must be 0 or more (got {rollover_keep}).")
    return errors


def version_errors(version, minimum_version, archive_sha512, known_checksums):
    errors = []
    if LooseVersion(str(version)) < LooseVersion(str(minimum_version)):
        errors.append(f"broker_version {version} is not supported; use {minimum_version} or newer (Java 17 based, "
                      "with mirror connection management).")
    if len(str(archive_sha512)) != 128:
        errors.append(f"broker_archive_sha512 must be the 128-hex-digit SHA-512 of the Artemis {version} archive "
                      f"(the role only knows it for {sorted(known_checksums)}).")
    return errors


def metrics_errors(enabled, registry, has_certificate, password_users, metrics_role, version, known_registries):
    if not enabled:
        return []
    scrapers = [user for user in password_users if metrics_role in user.get('roles', [])]
    if registry and has_certificate and scrapers:
        return []
    return [f"broker_metrics_enabled needs a Prometheus registry pinned for broker_version {version} (the role has "
            f"them for {sorted(known_registries)}), broker_tls_files['broker.pem'] (the endpoint is HTTPS only) and a "
            f"user of broker_metrics_role \"{metrics_role}\" to scrape with (broker_monitor_password or broker_users); "
            "or set broker_metrics_enabled to false (it is on by default)."]


def port_errors(ports, acceptor_names):
    numbers = [_int(port) for port in ports]
    if len(set(numbers)) == len(numbers) and len(set(acceptor_names)) == len(acceptor_names):
        return []
    return ["broker_acceptors, the peers' acceptors, broker_management_port and broker_metrics_port must use distinct "
            f"ports and acceptor names (ports: {numbers}, acceptors: {list(acceptor_names)})."]


def host_name_errors(firewalld_zone, selinux_port_type):
    errors = []
    if not FIREWALLD_ZONE.match(str(firewalld_zone)):
        errors.append(f"broker_firewalld_zone (\"{firewalld_zone}\") must be a firewalld zone name or empty.")
    if not SELINUX_TYPE.match(str(selinux_port_type)):
        errors.append(f"broker_selinux_port_type (\"{selinux_port_type}\") must be an SELinux type (ending in _t) or "
                      "empty.")
    return errors


def address_name_errors(addresses, queues):
    names = ([entry.get('name') for entry in addresses]
             + [queue for entry in addresses for queue in entry.get('queues', [])]
             + [entry.get('name') for entry in queues] + [entry['address'] for entry in queues if entry.get('address')])
    refused = [name for name in map(str, names) if not PLAIN_NAME.match(name) or BROKER_PREFIX.match(name)]
    if not refused:
        return []
    return ["broker_addresses or broker_queues name addresses or queues that Artemis cannot take as plain names: "
            f"{refused} (no whitespace, no wildcard '#' or '*', not under the broker's own activemq. or "
            "$ACTIVEMQ_ARTEMIS prefixes)."]


def settings_errors(settings, derived):
    """Every problem of the broker role's `settings` (SETTINGS, by name), one sentence each; [] when there is none.
    `derived` (DERIVED): what the role computes from them in its vars/main.yml, and `defined`, the names of
    REMOVED_VARIABLES the inventory still defines."""
    missing = [name for name in SETTINGS if name not in settings] + [name for name in DERIVED if name not in derived]
    if missing:
        raise ValueError(f"settings_errors needs {missing}")
    s, d = settings, derived
    return (secret_errors(s['broker_admin_password'], s['broker_monitor_password'],
                          s['broker_users'] + s['broker_peer_users'])
            + masked_login_errors({name: s[name] for name in ('broker_admin_password', 'broker_monitor_password',
                                                              'broker_cluster_password')})
            + hash_iteration_errors(s['broker_user_hash_iterations'])
            + ha_errors(s['broker_ha'], s['broker_cluster_password'], d['core_port'])
            + removed_variable_errors(d['defined'])
            + certificate_user_errors(s['broker_certificate_users'], d['password_users'])
            + journal_file_size_errors(s['broker_journal_file_size'])
            + jvm_errors(s['broker_java_max_heap'], s['broker_java_min_heap'], s['broker_java_gc_args'],
                         s['broker_java_extra_args'], s['broker_java_home'])
            + login_errors(s['broker_login_modules'], s['broker_ldap'], d['ldap_options'])
            + capacity_errors(s['broker_global_max_size'], s['broker_max_disk_usage'])
            + logging_errors(s['broker_log_levels'], s['broker_log_dir'], s['broker_log_rollover_size'],
                             s['broker_log_rollover_keep'])
            + version_errors(s['broker_version'], d['minimum_version'], s['broker_archive_sha512'],
                             d['known_checksums'])
            + metrics_errors(s['broker_metrics_enabled'], d['metrics_registry'], d['has_certificate'],
                             d['password_users'], s['broker_metrics_role'], s['broker_version'],
                             d['known_registries'])
            + port_errors(d['ports'], d['acceptor_names'])
            + host_name_errors(s['broker_firewalld_zone'], s['broker_selinux_port_type'])
            + address_name_errors(s['broker_addresses'], s['broker_queues']))
