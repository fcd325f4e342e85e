# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a broker's own routing configuration may say and what broker.xml makes of it: connectors, queues, diverts
and core bridges (the broker role's broker_connectors, broker_queues, broker_diverts and broker_bridges).

The role's argument specs check each entry's shape; the rules here are the ones between entries, which Artemis would
otherwise only report in its log (a bridge to a connector that does not exist does not start, a divert named like a
queue is refused, and a duplicate name of the shared xsd:ID space stops the broker at start).
"""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree
from xml.sax.saxutils import unescape

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    MIRROR_QUEUE_PREFIX, STOPS_ROUTING_REASON)

# What an entry's unset options mean (the role's argument specs document the same values; a unit test compares them).
CONNECTOR_DEFAULTS = {'port': 61616, 'tls': True, 'trust_store_path': None, 'parameters': {}}
QUEUE_DEFAULTS = {'address': None, 'routing_type': 'anycast', 'filter': None, 'durable': None, 'max_consumers': None,
                  'exclusive': None, 'purge_on_no_consumers': None, 'last_value_key': None}
DIVERT_DEFAULTS = {'filter': None, 'exclusive': False, 'routing_type': 'strip', 'routing_name': None,
                   'transformer': None}
# A bridge over a WAN backs off to 30 s between attempts and never gives up; duplicate detection with a confirmation
# window lets it resend what was unconfirmed when a connection broke without delivering anything twice.
BRIDGE_DEFAULTS = {'password': None, 'forwarding_address': None, 'filter': None, 'transformer': None, 'ha': False,
                   'retry_interval': 2000, 'retry_interval_multiplier': 2.0, 'max_retry_interval': 30000,
                   'reconnect_attempts': -1, 'check_period': 30000, 'connection_ttl': 60000,
                   'use_duplicate_detection': True, 'confirmation_window_size': 1048576,
                   'routing_type': 'pass', 'concurrency': 1}

# Connector names the broker role gives the HA pair's own connectors (fragments/ha.xml.j2).
HA_CONNECTOR = re.compile(r'^(self|peer-[0-9]+)$')
# Divert and bridge names are xsd:ID values: XML NCNames, one space for both.
NCNAME = re.compile(r'^[A-Za-z_][A-Za-z0-9._-]*$')


def _with_defaults(entry, defaults):
    """The entry with every option present: what it sets, else the default (an option set to None is unset)."""
    return dict(defaults, **dict((key, value) for key, value in entry.items() if value is not None))


def _queue_entry(queue, address, routing_type):
    return dict(_with_defaults(queue, QUEUE_DEFAULTS), address=address, routing_type=routing_type)


def declared_queues(builtin_addresses, addresses, queues):
    """Every queue broker.xml declares: ``[{name, address, routing_type, ...}]`` from the built-in addresses,
    broker_addresses (queue names) and broker_queues (queue entries)."""
    declared = []
    for address in list(builtin_addresses) + list(addresses):
        routing_type = address.get('routing_type') or 'anycast'
        for name in address.get('queues') or [address['name']]:
            declared.append(_queue_entry({'name': name}, address['name'], routing_type))
    for queue in queues:
        declared.append(_queue_entry(queue, queue.get('address') or queue['name'], queue.get('routing_type') or
                                     'anycast'))
    return declared


def address_elements(builtin_addresses, addresses, queues):
    """The ``<addresses>`` of broker.xml: ``[{name, anycast: [queue], multicast: [queue]}]`` in the order addresses
    first appear, each queue once under its routing type."""
    elements = {}
    for queue in declared_queues(builtin_addresses, addresses, queues):
        element = elements.setdefault(queue['address'], {'name': queue['address'], 'anycast': [], 'multicast': []})
        element[queue['routing_type']].append(dict((key, value) for key, value in queue.items()
                                                   if key not in ('address', 'routing_type')))
    return list(elements.values())


def diverts(entries):
    return [_with_defaults(entry, DIVERT_DEFAULTS) for entry in entries]


def bridges(entries):
    return [_with_defaults(entry, BRIDGE_DEFAULTS) for entry in entries]


def connector_url(connector, tls_dir):
    """A connector's URL: ``tcp://host:port`` and its parameters; with ``tls`` the estate's CA verifies the remote
    broker's certificate and host name (``trust_store_path`` names another CA file)."""
    connector = _with_defaults(connector, CONNECTOR_DEFAULTS)
    parameters = {}
    if connector['tls']:
        parameters.update({'sslEnabled': 'true', 'trustStoreType': 'PEMCA',
                           'trustStorePath': connector['trust_store_path'] or tls_dir + '/ca.pem', 'verifyHost': 'true'})
    parameters.update(dict((key, str(value).lower() if isinstance(value, bool) else str(value))
                           for key, value in connector['parameters'].items()))
    query = ';'.join('%s=%s' % (key, parameters[key]) for key in sorted(parameters))
    return 'tcp://%s:%s%s' % (connector['host'], connector['port'], '?' + query if query else '')


def _duplicates(names):
    seen, duplicated = set(), []
    for name in names:
        if name in seen and name not in duplicated:
            duplicated.append(name)
        seen.add(name)
    return duplicated


def config_errors(builtin_addresses, addresses, queues, connectors, diverts, bridges, has_ca=True):
    """Why these entries cannot make a working broker.xml, each naming its variable and entry; empty when they can."""
    errors = []
    connector_names = [connector['name'] for connector in connectors]
    for name in _duplicates(connector_names):
        errors.append('broker_connectors: two connectors are named %r' % name)
    for connector in connectors:
        if HA_CONNECTOR.match(connector['name']):
            errors.append('broker_connectors: %r is the name of one of the HA pair\'s own connectors; choose another'
                          % connector['name'])
        if connector.get('tls') is not False and not connector.get('trust_store_path') and not has_ca:
            errors.append('broker_connectors: %r uses TLS but broker_tls_files has no ca.pem to verify the remote '
                          'broker with (set trust_store_path, or tls: false for a link that stays inside a trusted '
                          'network)' % connector['name'])

    declared = declared_queues(builtin_addresses, addresses, queues)
    queue_names = [queue['name'] for queue in declared]
    for name in _duplicates(queue_names):
        errors.append('broker_queues: the queue %r is declared twice (broker_addresses and broker_queues declare '
                      'queues in one name space)' % name)

    routing_names = [divert['name'] for divert in diverts] + [bridge['name'] for bridge in bridges]
    for name in _duplicates(routing_names):
        errors.append('broker_diverts/broker_bridges: %r names two of them (diverts and bridges share one name '
                      'space)' % name)
    for kind, entries in (('broker_diverts', diverts), ('broker_bridges', bridges)):
        for entry in entries:
            if not NCNAME.match(entry['name']):
                errors.append('%s: %r is not a valid name (a letter or _ first, then letters, digits, ., - or _)'
                              % (kind, entry['name']))

    for divert in diverts:
        if not divert.get('address'):
            errors.append('broker_diverts: %r has no address to divert from' % divert['name'])
        if not divert.get('forwarding_address'):
            errors.append('broker_diverts: %r has no forwarding_address' % divert['name'])
        if divert.get('address') and divert.get('address') == divert.get('forwarding_address'):
            errors.append('broker_diverts: %r forwards %r to itself' % (divert['name'], divert['address']))
        if divert['name'] in queue_names:
            errors.append('broker_diverts: %r is also the name of a queue (a divert is a binding like a queue)'
                          % divert['name'])

    for bridge in bridges:
        if bridge.get('queue') not in queue_names:
            errors.append('broker_bridges: %r forwards from the queue %r, which neither broker_queues nor '
                          'broker_addresses declares' % (bridge['name'], bridge.get('queue')))
        if not bridge.get('connectors'):
            errors.append('broker_bridges: %r has no connectors to forward to' % bridge['name'])
        for name in bridge.get('connectors') or []:
            if name not in connector_names:
                errors.append('broker_bridges: %r forwards to the connector %r, which broker_connectors does not '
                              'define' % (bridge['name'], name))
    return errors


# An acceptor as broker.xml writes it: <acceptor name="...">tcp://host:port?key=value;...</acceptor>.
ACCEPTOR_ELEMENT = re.compile(r'<acceptor\s+name="([^"]*)"\s*>\s*tcp://[^<?]*:(\d+)(?:\?([^<]*?))?\s*</acceptor>')


def _transport(port, parameters):
    tls = str(parameters.get('sslEnabled', 'false')).lower() == 'true'
    return '%s %s' % (port, 'over TLS' if tls else 'in plain text')


def acceptor_changes(broker_xml, acceptors):
    """What a new set of ``acceptors`` (name, port, parameters) changes of those a broker.xml text has now: every
    acceptor removed, or on another port, or switched between plain text and TLS, each as a sentence. Clients of such
    an acceptor cannot reconnect once the broker restarts."""
    current = {}
    for name, port, query in ACCEPTOR_ELEMENT.findall(broker_xml or ''):
        parameters = dict(part.split('=', 1) for part in unescape(query or '').split(';') if '=' in part)
        current[unescape(name)] = _transport(int(port), parameters)
    wanted = dict((acceptor['name'], _transport(int(acceptor['port']), acceptor.get('parameters') or {}))
                  for acceptor in acceptors)
    changes = []
    for name in sorted(current):
        if name not in wanted:
            changes.append('acceptor %s (%s) removed' % (name, current[name]))
        elif wanted[name] != current[name]:
            changes.append('acceptor %s: %s, then %s' % (name, current[name], wanted[name]))
    return changes


# An absolute path of plain parts, without a $ (broker.xml substitutes ${...}) or a backslash.
_STORE_PATH = re.compile(r'^(/[^/\x00-\x1f$\\]+)+\Z')


def store_errors(stores):
    """Why the broker's stores (``[{variable, path}]``: journal, bindings, paging, large messages) cannot be placed
    so: a path that is not absolute and plain, or two stores in one directory or one inside another (Artemis takes
    every file of a store's directory for its own)."""
    errors = []
    for store in stores:
        path = store['path']
        if not isinstance(path, str) or not _STORE_PATH.match(path) or {'.', '..'} & set(path.split('/')):
            errors.append('%s must be an absolute path without a trailing slash, a . or .. part, a line break, a $ or '
                          'a backslash (got %r; it defaults to a directory of broker_data_dir)'
                          % (store['variable'], path))
    if errors:
        return errors
    for index, store in enumerate(stores):
        for other in stores[index + 1:]:
            if store['path'] == other['path']:
                errors.append('%s and %s are the same directory (%s): each store needs its own'
                              % (store['variable'], other['variable'], store['path']))
            for inner, outer in ((store, other), (other, store)):
                if inner['path'].startswith(outer['path'] + '/'):
                    errors.append('%s (%s) is inside %s (%s): each store needs a directory of its own'
                                  % (inner['variable'], inner['path'], outer['variable'], outer['path']))
    return errors


def moved_stores(broker_xml, stores):
    """The stores (``[{variable, element, path}]``) that a broker.xml text keeps elsewhere: ``[{variable, from,
    to}]``, in the order of ``stores``; none when the text has no such element (no instance yet)."""
    moved = []
    for store in stores:
        match = re.search(r'<%s>([^<]*)</%s>' % (store['element'], store['element']), broker_xml or '')
        if match and unescape(match.group(1)).strip() != store['path']:
            moved.append({'variable': store['variable'], 'from': unescape(match.group(1)).strip(),
                          'to': store['path']})
    return moved


def _plain_text_without_passwords(acceptor):
    return acceptor.get('tls', True) is False and not acceptor.get('plain_text_passwords', False)


def client_acceptors(acceptors, tls_parameters, certificate_domain):
    """broker_acceptors as broker.xml writes them: TLS (``tls_parameters``) unless one says ``tls: false``; a
    plain-text one without ``plain_text_passwords`` offers SASL EXTERNAL alone, in the certificate domain, so no
    password login exists on it. Parameters an acceptor names itself win."""
    written = []
    for acceptor in acceptors:
        if acceptor.get('tls', True):
            added = dict(tls_parameters)
        elif _plain_text_without_passwords(acceptor):
            added = {'securityDomain': certificate_domain, 'saslMechanisms': 'EXTERNAL'}
        else:
            added = {}
        added.update(acceptor.get('parameters') or {})
        written.append(dict(acceptor, parameters=added))
    return written


def acceptor_errors(acceptors):
    """What is unclear or unsafe in broker_acceptors' TLS and password settings, a sentence per rule broken."""
    errors = []
    unclear = [acceptor['name'] for acceptor in acceptors
               if not isinstance(acceptor.get('tls', True), bool)
               or not isinstance(acceptor.get('plain_text_passwords', False), bool)
               or (acceptor.get('plain_text_passwords') is True and acceptor.get('tls', True) is not False)]
    if unclear:
        errors.append('broker_acceptors %r: tls and plain_text_passwords are true or false, and plain_text_passwords: '
                      'true only goes with tls: false (an acceptor that takes passwords in plain text says both).'
                      % unclear)
    # CORE, OpenWire, STOMP and MQTT carry the password with the login, and Artemis would take it on any acceptor:
    # its authentication cache is keyed by user and password without the acceptor's security domain (and the cluster
    # user is checked before any domain). AMQP there is offered SASL EXTERNAL alone.
    with_logins = [acceptor['name'] for acceptor in acceptors
                   if _plain_text_without_passwords(acceptor) and list(acceptor.get('protocols') or []) != ['AMQP']]
    if with_logins:
        errors.append('broker_acceptors %r are plain text (tls: false) and take no password, so they may speak only '
                      'AMQP (protocols: [AMQP], whose clients are offered SASL EXTERNAL alone). A CORE, OpenWire, '
                      'STOMP or MQTT login carries the password in plain text, and Artemis would take one it had seen '
                      'before on another acceptor. Use TLS, or say plain_text_passwords: true.' % with_logins)
    return errors


# Broker properties (Artemis's etc/broker.properties, applied over broker.xml at start) name the bean properties of
# Artemis's configuration; the first part of a key is one of them. Those the collection sets itself, and where to
# set them instead: a key may not change replication, security or what a role variable already says.
_OWNED_BY = {
    'the replication role (the mirrors)': ('amqpconnections', 'amqpconnectionconfigurations', 'internalnamingprefix',
                                           'mirrorackmanagerwarnunacked', 'mirrorpagetransaction'),
    'broker_acceptors': ('acceptorconfigurations',),
    'broker_connectors': ('connectorconfigurations',),
    'broker_bridges': ('bridgeconfigurations',),
    'broker_diverts': ('divertconfigurations',),
    'broker_addresses or broker_queues': ('addressconfigurations', 'queueconfigs', 'queueconfigurations'),
    'broker_address_settings': ('addresssettings', 'addressessettings'),
    'broker_roles and broker_management_roles': (
        'securityenabled', 'securityroles', 'securitysettingplugins', 'securityrolenamemappings', 'jaasconfigs',
        'managementmessagerbac', 'managementrbacprefix', 'viewpermissionmethodmatchpattern', 'managementaddress',
        'managementnotificationaddress', 'rejectemptyvalidateduser', 'populatevalidateduser'),
    'broker_ha': ('hapolicyconfiguration', 'clusteruser', 'clusterpassword', 'clusterconfigurations',
                  'broadcastgroupconfigurations', 'discoverygroupconfigurations', 'nodemanagerlockdirectory',
                  'lockcoordinatorconfigurations', 'checkforprimaryserver'),
    # A hung live broker halts so that its backup takes over.
    'nothing: the HA takeover relies on the critical analyzer halting a hung broker': (
        'criticalanalyzer', 'criticalanalyzerpolicy'),
    'broker_metrics_enabled and the replication role (the broker plugins)': (
        'brokerplugins', 'metricsplugin', 'metricsconfiguration', 'incominginterceptorclassnames',
        'outgoinginterceptorclassnames'),
    'broker_journal_dir': ('journaldirectory',),
    'broker_bindings_dir': ('bindingsdirectory',),
    'broker_paging_dir': ('pagingdirectory',),
    'broker_large_messages_dir': ('largemessagesdirectory',),
    'broker_data_dir': ('persistenceenabled', 'journalretentiondirectory'),
    'broker_journal_type (a file journal: the HA pair and the mirror need one)': ('storeconfiguration',),
    'broker_journal_file_size': ('journalfilesize',),
    'broker_journal_type': ('journaltype',),
    'broker_journal_datasync': ('journaldatasync',),
    'broker_journal_compact_min_files': ('journalcompactminfiles',),
    'broker_journal_compact_percentage': ('journalcompactpercentage',),
    'broker_global_max_size': ('globalmaxsize',),
    'broker_max_disk_usage': ('maxdiskusage', 'mindiskfree'),
    'broker_name': ('name',),
    # Address matching and reloading are what the collection's own settings rely on.
    'nothing: the estate relies on the default wildcards': ('wildcardconfiguration', 'wildcardroutingenabled'),
    'nothing: the role relies on Artemis reloading broker.xml': ('configurationfilerefreshperiod',),
    'nothing: the collection masks and reads its own passwords': ('passwordcodec', 'maskpassword'),
    "nothing: the collection's management calls rely on them": ('jmxdomain', 'jmxusebrokername',
                                                                'jmxmanagementenabled'),
    "nothing: federation beside the estate's replication is not supported": ('federationconfigurations',
                                                                             'federationdownstreamauthorization'),
}
# Keys that change how Artemis reads the others (quoting, removal), or that Artemis rewrites before applying them
# (a ${...} substitution, an index or a map key): what they would reach cannot be checked, so they are refused.
_PARSER_KEYS = ('key.surround', 'remove.value')
_REWRITTEN = re.compile(r'\$\{|[\[(]')
OWNED_BROKER_PROPERTIES = dict((name, owner) for owner, names in _OWNED_BY.items() for name in names)


def broker_property_errors(properties):
    """Why ``properties`` (broker_properties) cannot be written: a key that is not a non-empty string, a value that is
    not a string, number or boolean, or a key the collection owns (``OWNED_BROKER_PROPERTIES``)."""
    errors = []
    if not isinstance(properties, dict):
        return ['broker_properties must be a dictionary of keys and values, got %s' % type(properties).__name__]
    for key, value in properties.items():
        if not isinstance(key, str) or not key.strip():
            errors.append('broker_properties: a key must be a non-empty string, got %r' % (key,))
            continue
        if value is None or isinstance(value, (dict, list)):
            errors.append('broker_properties[%r] must be a string, number or boolean, got %r' % (key, value))
        if key.strip().lower() in _PARSER_KEYS or _REWRITTEN.search(key):
            errors.append('broker_properties[%r]: a key that changes how Artemis reads the others or that it rewrites '
                          '(%s, ${...}, [index], (key)) is refused' % (key, ', '.join(_PARSER_KEYS)))
            continue
        first = key.split('.', 1)[0].strip().strip('"\'')
        owner = OWNED_BROKER_PROPERTIES.get(first.lower())
        if owner and owner.startswith('nothing: '):
            errors.append("broker_properties[%r]: %s is the collection's own (%s)" % (key, first, owner[9:]))
        elif owner:
            errors.append('broker_properties[%r]: %s is set by the collection; use %s' % (key, first, owner))
    return errors


_PROPERTIES_ESCAPES = {'\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\f': '\\f'}


def _properties_escape(text, key):
    """``text`` as java.util.Properties reads it back: separators in a key and a leading blank escaped, control and
    non-ASCII characters as \\uXXXX."""
    escaped = []
    for position, char in enumerate(text):
        if char in _PROPERTIES_ESCAPES:
            escaped.append(_PROPERTIES_ESCAPES[char])
        elif (key and char in '=: #!') or (position == 0 and char in ' #!'):
            escaped.append('\\' + char)
        elif not ' ' <= char <= '~':
            utf16 = char.encode('utf-16-be')
            escaped.append(''.join('\\u%02x%02x' % (utf16[i], utf16[i + 1]) for i in range(0, len(utf16), 2)))
        else:
            escaped.append(char)
    return ''.join(escaped)


def broker_properties_text(properties):
    """The lines of etc/broker.properties for ``properties``, sorted by key (booleans as Artemis writes them)."""
    lines = []
    for key in sorted(properties):
        value = properties[key]
        value = ('true' if value else 'false') if isinstance(value, bool) else str(value)
        lines.append('%s=%s' % (_properties_escape(key, key=True), _properties_escape(value, key=False)))
    return '\n'.join(lines)


def unapplied_broker_properties(status):
    """The broker properties Artemis could not apply, from its status (the broker's ``Status`` attribute, JSON):
    ``["key: the exception's class"]`` over every properties file it read."""
    sources = ((json.loads(status) if isinstance(status, str) else status or {})
               .get('configuration', {}).get('properties', {}))
    # Artemis records the entry (key=value, the value unmasked) and an exception that may quote the value: only the
    # key and the exception's class are kept, as a value may be a secret.
    return ['%s: %s' % (str(error.get('value')).split('=', 1)[0], str(error.get('reason')).split(':', 1)[0])
            for source in sources.values() for error in (source.get('errors') or [])]


# A mirror whose address filter allows only this prefix routes nothing into its store-and-forward queue (no address
# is created under Artemis's own prefix) and goes on sending what the queue holds.
RETIRED_MIRROR_FILTER = '$ACTIVEMQ_ARTEMIS_RETIRED_MIRROR.'


def _flag(value, default):
    return default if value is None else value.strip().lower() == 'true'


def mirror_connections_in_use(broker_xml):
    """The AMQP connections with a mirror that a broker.xml text configures: ``[{name, uri, user, masked_password,
    retry_interval, mirror: {message_acknowledgements, queue_creation, queue_removal, address_filter}}]`` (user and
    password as the file has them, masked; none when the text is empty or has no connection)."""
    if not (broker_xml or '').strip():
        return []
    connections = []
    for element in ElementTree.fromstring(broker_xml).iterfind('.//{*}amqp-connection'):
        mirror = element.find('{*}mirror')
        if mirror is None:
            continue
        connection = {'name': element.get('name'), 'uri': element.get('uri'),
                      'retry_interval': int(element.get('retry-interval') or 5000),
                      'mirror': {'message_acknowledgements': _flag(mirror.get('message-acknowledgements'), True),
                                 'queue_creation': _flag(mirror.get('queue-creation'), True),
                                 'queue_removal': _flag(mirror.get('queue-removal'), True),
                                 'address_filter': mirror.get('address-filter') or ''}}
        if element.get('user'):
            connection.update(user=element.get('user'), masked_password=element.get('password'))
        connections.append(connection)
    return connections


def retired_mirrors(broker_xml, wanted, listed_queues):
    """The mirror connections a broker keeps although ``wanted`` (broker_amqp_connections) no longer has them, each
    as in use but with the address filter that routes nothing: Artemis would strand what a dropped connection's
    store-and-forward queue holds (events for a datacentre that has not had them). One goes once it is retired in the
    broker.xml text in use and ``listed_queues`` (the running broker's listQueues rows, a queue it does not list holding
    nothing; None when it could not be read) has its queue empty; while the broker cannot tell, it stays. Each also
    says its ``backlog`` (None when not read) and ``stops_routing``: whether it routes in use, so that these settings
    stop it routing, a change a broker may take only in the rolling restart's order (artemis_estate.restart_order)."""
    wanted_names = set(connection['name'] for connection in wanted)
    backlogs = None if listed_queues is None else dict(
        (queue['name'], int(queue['messageCount'])) for queue in listed_queues)
    kept = []
    for connection in mirror_connections_in_use(broker_xml):
        if connection['name'] in wanted_names:
            continue
        backlog = None if backlogs is None else backlogs.get(MIRROR_QUEUE_PREFIX + connection['name'], 0)
        if connection['mirror']['address_filter'] == RETIRED_MIRROR_FILTER and backlog == 0:
            continue
        stops_routing = connection['mirror']['address_filter'] != RETIRED_MIRROR_FILTER
        connection['mirror'] = dict(connection['mirror'], address_filter=RETIRED_MIRROR_FILTER)
        kept.append(dict(connection, backlog=backlog, stops_routing=stops_routing))
    return kept


def stops_routing_reasons(retired):
    """The restart reason that the ``retired`` connections (retired_mirrors) stop routing, for the broker's pending
    restart: [] when none routes in use."""
    names = [connection['name'] for connection in retired if connection['stops_routing']]
    return [STOPS_ROUTING_REASON + ', '.join(names)] if names else []
