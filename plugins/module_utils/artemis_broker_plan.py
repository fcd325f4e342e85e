# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One broker's part of the estate: everything its configuration needs from the estate model
(artemis_estate.model), computed once by the replication role (filter ``continuity.artemis.broker_plan``).

``hosts``: per datacentre, its broker hosts in inventory order (``name``, ``address``: where the others reach it);
the first is the primary of a pair. ``settings``: the replication role's variables without their ``replication_``
prefix (layout, tls, port, tls_port, ha_port, ha_failback, ha_failure_detection_ms, zookeeper, idle_timeout,
retry_interval, user, password, external_brokers).
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import EstateError

HA_POLICIES = {'standalone': 'none', 'shared_nothing': 'replication', 'shared_store': 'shared_store'}
ZOOKEEPER_LOCK_MANAGER = 'org.apache.activemq.artemis.lockmanager.zookeeper.CuratorDistributedLockManager'
# TLS files live in the broker instance's etc/tls (the broker role writes them); Artemis expands ${artemis.instance}.
TLS_DIR = '${artemis.instance}/etc/tls'
BRIDGE_CONNECTOR_PREFIX = 'continuity.'
EXTERNAL_CONNECTOR_PREFIX = 'continuity.external.'
EXTERNAL_BROKER_PORT = 61616
# Artemis's own transformer: it stamps the datacentre of origin on the bridge's copy (the outbound queues' filter
# keeps a stamped message from being forwarded again).
ORIGIN_TRANSFORMER = 'org.apache.activemq.artemis.core.server.transformer.AddHeadersTransformer'


def _datacentre_of(host, hosts):
    found = [datacentre for datacentre, members in hosts.items() if host in [member['name'] for member in members]]
    if len(found) != 1:
        raise EstateError('%s is in %s of replication_datacentres; every broker host must be in exactly one '
                          'datacentre group' % (host, found))
    return found[0]


def _ha(host, datacentre, hosts, settings):
    layout = settings['layout']
    if layout not in HA_POLICIES:
        raise EstateError("replication_layout %r of datacentre %s is none of %s"
                          % (layout, datacentre, ', '.join(HA_POLICIES)))
    members = hosts[datacentre]
    zookeeper = settings.get('zookeeper') or {}
    return {
        'policy': HA_POLICIES[layout],
        'backup': host != members[0]['name'],
        'failback': settings['ha_failback'],
        'failure_detection_ms': settings['ha_failure_detection_ms'],
        'group': datacentre,
        'peers': ['%s:%s' % (member['address'], settings['ha_port']) for member in members
                  if member['name'] != host] if layout != 'standalone' else [],
        'lock_manager': {'class_name': ZOOKEEPER_LOCK_MANAGER, 'properties': zookeeper}
        if zookeeper and layout == 'shared_nothing' else {},
    }


def _uri_options(settings):
    """The mirror verifies the target's certificate and host name against the estate's CA and presents its own.
    amqpIdleTimeout: the connection's TTL; the target sends a frame at least every half of it, so a connection that
    hangs (half-open across a WAN, or opened while the target was still starting) is dropped and retried after it."""
    options = (['sslEnabled=true', 'trustStoreType=PEMCA', 'trustStorePath=%s/ca.pem' % TLS_DIR, 'verifyHost=true',
                'keyStoreType=PEM', 'keyStorePath=%s/broker.pem' % TLS_DIR] if settings['tls'] else [])
    return '?' + ';'.join(options + ['amqpIdleTimeout=%s' % settings['idle_timeout']])


def _mirror_connections(model, datacentre, hosts, settings):
    """Each connection lists every broker of the target datacentre (primary#backup), so it follows an HA pair."""
    tls = settings['tls']
    port = settings['tls_port'] if tls else settings['port']
    connections = []
    for link in model['mirror_connections']:
        if link['source'] != datacentre:
            continue
        uris = ['tcp://%s:%s%s' % (member['address'], port, _uri_options(settings)) for member in hosts[link['target']]]
        connection = {'name': link['name'], 'uri': uris[0] + ('#' + ','.join(uris[1:]) if uris[1:] else ''),
                      'retry_interval': settings['retry_interval'],
                      'mirror': {'message_acknowledgements': link['message_acknowledgements'], 'queue_creation': True,
                                 'queue_removal': True, 'address_filter': link['address_filter']}}
        if not tls:
            connection.update(user=settings['user'], password=settings['password'])
        connections.append(connection)
    return connections


def _routing(model, datacentre, hosts, settings):
    """The bridge engine: per bridge of this datacentre an outbound queue, diverts that copy into it what was
    produced here (no origin stamped yet), and a core bridge to the brokers of the remote datacentre, which logs in
    there by this broker's certificate (on the mirror acceptor), stamps the origin on the copy and delivers it to the
    group's inbound address, from where the broker plugin sends it on to its own address. Every datacentre has the
    inbound addresses (a queue each: a copy the plugin could not send on waits there rather than being dropped).
    An export to a broker outside the estate (no plugin there) diverts one declared address into an export queue
    whose bridge delivers to that same address, logging in with the user and password the inventory gives."""
    tls = settings['tls']
    peers = [other for other in model['datacentres'] if other != datacentre]
    routing = {'queues': [], 'connectors': [], 'diverts': [], 'bridges': [], 'inbound_prefix': '',
               'identity_prefixes': []}
    idle_timeout = int(settings['idle_timeout'])
    bridge_settings = {'retry_interval': settings['retry_interval'], 'retry_interval_multiplier': 1.0,
                       'check_period': idle_timeout // 2, 'connection_ttl': idle_timeout,
                       'transformer': {'class_name': ORIGIN_TRANSFORMER,
                                       'properties': {model['origin_property']: datacentre}}}
    links = [link for link in model['bridge_links'] if link['source'] == datacentre]

    def connectors_of(target):
        return [BRIDGE_CONNECTOR_PREFIX + member['name'] for member in hosts[target]]

    if tls:
        for target in peers:
            routing['connectors'] += [{'name': BRIDGE_CONNECTOR_PREFIX + member['name'], 'host': member['address'],
                                       'port': int(settings['tls_port']), 'tls': True,
                                       'parameters': {'keyStoreType': 'PEM',
                                                      'keyStorePath': '%s/broker.pem' % TLS_DIR}}
                                      for member in hosts[target]]
        routing['queues'].append({'name': model['activation_address'], 'durable': True,
                                  'last_value_key': model['activation_group_property']})
        routing['activation_check'] = {'datacentre': datacentre, 'user': settings['user'],
                                       'unheard': settings['activation_unheard'],
                                       'timeout_ms': int(settings['activation_check_timeout_ms']),
                                       'fence_staging': model['fence_staging'],
                                       'connectors': [name for target in peers for name in connectors_of(target)]}
    routing.update(inbound_prefix=model['inbound_prefix'] if links else '',
                   peer_role=model['replication_role'] if links else '',
                   identity_prefixes=model['identity_prefixes'] if links else [])
    if links and model['staging_delays']:
        routing.update(datacentre=datacentre, notice_prefix=model['notice_prefix'],
                       staging_delays=model['staging_delays'])
    for inbound in dict.fromkeys(link['inbound'] for link in links):
        routing['queues'].append({'name': inbound, 'durable': True})
    not_stamped = model['origin_property'] + ' IS NULL'
    for link in links:
        routing['queues'].append({'name': link['name'], 'durable': True})
        routing['diverts'] += [{'name': divert['name'], 'address': divert['address'], 'forwarding_address': link['name'],
                                'filter': not_stamped} for divert in link['diverts']]
        routing['bridges'].append(dict(bridge_settings, name=link['name'], queue=link['name'],
                                       forwarding_address=link['inbound'], user=settings['user'],
                                       connectors=connectors_of(link['target'])))
    for external in settings.get('external_brokers') or []:
        connectors = []
        for index, address in enumerate(external['hosts']):
            connectors.append('%s%s.%s' % (EXTERNAL_CONNECTOR_PREFIX, external['name'], index))
            connector = {'name': connectors[-1], 'host': address['host'],
                         'port': int(address.get('port', EXTERNAL_BROKER_PORT)),
                         'tls': boolean(external.get('tls', True))}
            if external.get('trust_store_path'):
                connector['trust_store_path'] = external['trust_store_path']
            routing['connectors'].append(connector)
        for export in model['exports']:
            if export['broker'] != external['name']:
                continue
            routing['queues'].append({'name': export['name'], 'durable': True})
            routing['diverts'].append({'name': export['divert'], 'address': export['address'],
                                       'forwarding_address': export['name'], 'filter': not_stamped})
            routing['bridges'].append(dict(bridge_settings, name=export['name'], queue=export['name'],
                                           forwarding_address=export['address'], routing_type=export['routing_type'],
                                           user=external['user'], password=external['password'],
                                           connectors=connectors))
    return routing


def broker_plan(model, host, hosts, settings):
    """What ``host`` runs: ``datacentre``, ``ha`` (its pairing), ``address_staging``, ``users`` and ``roles`` (who
    the other datacentres' brokers log in as, and what they may do), mirror ``connections``, the bridge engine's
    ``routing``, the ``probe_addresses`` the measurement may use and the ``tls_dir`` of its TLS files."""
    datacentre = _datacentre_of(host, hosts)
    settings = dict(settings, tls=boolean(settings['tls']))
    return {
        'datacentre': datacentre,
        'ha': _ha(host, datacentre, hosts, settings),
        # A full_state group is staged wherever it is not owned: its copies wait there, undeliverable, until
        # activation.
        'address_staging': model['staging'][datacentre],
        # Without TLS the mirrors log in with the replication user's password; with TLS by their certificate, on the
        # mirror acceptor only, and the replication user has no password login at all.
        'users': [] if settings['tls'] else [{'name': settings['user'], 'password': settings['password'],
                                              'roles': [model['replication_role']]}],
        'roles': model['peer_roles'][datacentre],
        'connections': _mirror_connections(model, datacentre, hosts, settings),
        'routing': _routing(model, datacentre, hosts, settings),
        'probe_addresses': [route['address'] for route in model['probe_routes']],
        'tls_dir': TLS_DIR,
    }
