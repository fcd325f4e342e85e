# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The estate model: what each address group means for every datacentre, in one place.

A group belongs to its ``owner`` (else the active datacentre) and is ``full_state`` unless it says
``messages_only``. A full_state group is staged wherever it is not owned. A group's ``engine`` carries it across:
``mirror`` (the default): the owner mirrors the group to every other datacentre and each of those mirrors it back (no
link between two non-owners: Artemis would relay the owner's events from one to the other). ``bridge``: every
datacentre diverts a copy of the messages that originated there into an outbound queue per remote datacentre, and a
core bridge forwards each queue to that datacentre's inbound address, stamping the copy with its origin so that it
is never forwarded again; there the collection's broker plugin sends each copy on to the address it was diverted
from. A full_state bridge group with a ``staging_delay_ms`` is active at every datacentre (neither owned nor staged):
a copy becomes deliverable only after the delay, and a consumer's acknowledgement crosses the same bridges as a
notice that removes the other datacentres' copies before then. The replication role and the playbooks read this
through the
``continuity.artemis.estate_*`` filters; the modules and the measurement import it.
"""

from __future__ import annotations

import re

FULL_STATE = 'full_state'
MESSAGES_ONLY = 'messages_only'
MODES = (FULL_STATE, MESSAGES_ONLY)
MIRROR = 'mirror'
BRIDGE = 'bridge'
ENGINES = (MIRROR, BRIDGE)
ROUTING_TYPES = ('anycast', 'multicast')

# Artemis takes a sender link to any address that starts with MIRROR_ADDRESS_PREFIX (and asks for the mirror
# capability) as a mirror, and names a mirror's store-and-forward queue, and the address it sends to at the target,
# MIRROR_QUEUE_PREFIX followed by the connection's name.
MIRROR_ADDRESS_PREFIX = '$ACTIVEMQ_ARTEMIS_MIRROR'
MIRROR_QUEUE_PREFIX = MIRROR_ADDRESS_PREFIX + '_'
# Every address the estate itself uses (the bridge engine's, the probes of the catch-all group, the messages a passive
# datacentre keeps) is under ESTATE_ADDRESS_PREFIX; no address group and no client role may claim it.
ESTATE_ADDRESS_PREFIX = 'continuity.'
PROBE_ADDRESS = ESTATE_ADDRESS_PREFIX + 'probe'
# Addresses that belong to the estate or to Artemis itself (its notifications and management address, its internal
# and the mirror's queues): no address group names a prefix under them, and no client role is granted there.
RESERVED_PREFIXES = (ESTATE_ADDRESS_PREFIX, 'activemq.', '$ACTIVEMQ_ARTEMIS')
# The bridge engine: outbound queues (and their bridges, named alike), the diverts that fill them and the inbound
# address a bridge delivers to; the broker plugin sends what arrives under INBOUND_ADDRESS_PREFIX on to the copy's
# original address. ORIGIN_PROPERTY is stamped on every copy a bridge forwards, with the datacentre it came from.
OUTBOUND_QUEUE_PREFIX = ESTATE_ADDRESS_PREFIX + 'out.'
DIVERT_PREFIX = ESTATE_ADDRESS_PREFIX + 'divert.'
INBOUND_ADDRESS_PREFIX = ESTATE_ADDRESS_PREFIX + 'in.'
ORIGIN_PROPERTY = 'continuity_origin'
# A message's identity across datacentres in a full_state bridge group: the broker plugin stamps an original with its
# own message id and a copy with its original's; (ORIGIN_PROPERTY or the datacentre it is at, this) names it anywhere.
SOURCE_ID_PROPERTY = 'continuity_source_id'
# Exports to brokers outside the estate (replication_external_brokers), which run no plugin of ours: per declared
# address a divert into an export queue and a bridge from it that delivers to that same address.
EXPORT_QUEUE_PREFIX = ESTATE_ADDRESS_PREFIX + 'export.'
EXPORT_DIVERT_PREFIX = ESTATE_ADDRESS_PREFIX + 'divert-export.'
# The security role the brokers of the other datacentres log in with (by password, or by certificate over TLS).
REPLICATION_ROLE = 'replication'
# A bridge's copy goes on (the broker plugin) to its own address at the remote datacentre, creating a queue the
# application created at its source at runtime; security is checked there, on the copy's own address.
BRIDGE_PEER_PERMISSIONS = ('send', 'createAddress', 'createDurableQueue')
# Active/active on bridges (a group's staging_delay_ms): the broker plugin sends a notice of each acknowledgement of
# one of the group's messages to the group's notice address, from where diverts put it into the outbound queues behind
# the copies it concerns; at a remote datacentre the plugin removes the copy the notice names.
ACK_NOTICE_PREFIX = ESTATE_ADDRESS_PREFIX + 'acks.'
# Which datacentre the operations last activated for each owned group: when artemis_site activates a datacentre it
# sends every broker that answers a record per group (a last-value queue keeps the newest per group). A broker that
# starts asks the other datacentres' brokers for theirs before its acceptors open (the broker plugin's activation
# check) and fences a group whose newest record names another datacentre: a datacentre lost in a failover comes back
# fenced. The other datacentres' brokers may only browse it.
ACTIVATION_ADDRESS = ESTATE_ADDRESS_PREFIX + 'activation'
ACTIVATION_GROUP_PROPERTY = 'continuity_group'
ACTIVATION_DATACENTRE_PROPERTY = 'continuity_active_datacentre'
ACTIVATION_AT_PROPERTY = 'continuity_activated_at'
# How a broker's pending restart (the broker role's marker) says that its new settings stop a mirror connection it
# routes now (artemis_broker_config.stops_routing_reasons): restart_order takes its datacentre after the others.
STOPS_ROUTING_REASON = 'stops routing mirror connections '


GROUP_NAME = re.compile(r'^[A-Za-z0-9-]+$')


class EstateError(ValueError):
    """The inventory's datacentres or address groups do not make an estate; the message names what is wrong."""


def _check_group_set(groups):
    """Names and prefixes that make one estate: a group each, at most one catch-all, a prefix in one group."""
    names = [group['name'] for group in groups]
    twice = sorted(set(name for name in names if names.count(name) > 1))
    if twice:
        raise EstateError('address groups need unique names; %s is the name of more than one' % ', '.join(twice))
    catch_alls = [group['name'] for group in groups if not group['addresses']]
    if len(catch_alls) > 1:
        raise EstateError('at most one address group has no addresses (the catch-all, every address no other group '
                          'has); %s have none' % ', '.join(catch_alls))
    owners = {}
    for group in groups:
        for prefix in group['addresses']:
            if prefix in owners:
                raise EstateError('address prefix %r is in address groups %s and %s; a prefix belongs to one group'
                                  % (prefix, owners[prefix], group['name']))
            owners[prefix] = group['name']


def normalise_groups(groups, active_datacentre):
    """The groups with ``addresses``, ``mode`` and ``owner`` filled in (a new list; the input is not changed)."""
    if not isinstance(groups, list) or not groups:
        raise EstateError('the address groups must be a list of at least one group, got %r' % (groups,))
    normalised = []
    for group in groups:
        if not isinstance(group, dict) or not group.get('name'):
            raise EstateError('every address group needs a name, got %r' % (group,))
        if not isinstance(group['name'], str) or not GROUP_NAME.match(group['name']):
            raise EstateError('address group %r: a name is made of letters, digits and "-" (it names mirror '
                              'connections and bridges)' % (group['name'],))
        mode = group.get('mode') or FULL_STATE
        if mode not in MODES:
            raise EstateError('address group %s: mode %r is not one of %s' % (group['name'], mode, ', '.join(MODES)))
        engine = group.get('engine') or MIRROR
        if engine not in ENGINES:
            raise EstateError('address group %s: engine %r is not one of %s'
                              % (group['name'], engine, ', '.join(ENGINES)))
        addresses = list(group.get('addresses') or [])
        for prefix in addresses:
            reserved = reserved_prefix(prefix)
            if reserved:
                raise EstateError('address group %s: prefix %r is under %r, which the estate and Artemis keep for '
                                  'themselves' % (group['name'], prefix, reserved))
        if engine == BRIDGE:
            _check_bridge_group(group['name'], addresses)
        delay = _staging_delay(group, mode, engine)
        normalised.append({'name': group['name'], 'addresses': addresses, 'mode': mode, 'engine': engine,
                           'owner': None if delay else group.get('owner') or active_datacentre,
                           'staging_delay_ms': delay})
    _check_group_set(normalised)
    return normalised


def estate_argument_spec():
    """The ``address_groups`` option of every module that reads the estate's groups (its documentation: the doc
    fragment ``continuity.artemis.estate``)."""
    return {'address_groups': dict(type='list', elements='dict', required=True, options=dict(
        name=dict(type='str', required=True),
        addresses=dict(type='list', elements='str', default=[]),
        # The model checks the mode and the engine (normalise_groups), naming the group.
        mode=dict(type='str', default=FULL_STATE),
        owner=dict(type='str'),
        engine=dict(type='str', default=MIRROR),
        staging_delay_ms=dict(type='int'),
    ))}


def reserved_prefix(name):
    """The reserved prefix an address or match starts with, else None."""
    return next((prefix for prefix in RESERVED_PREFIXES if isinstance(name, str) and name.startswith(prefix)), None)


def _staging_delay(group, mode, engine):
    delay = group.get('staging_delay_ms')
    if delay is None:
        return None
    if mode != FULL_STATE or engine != BRIDGE:
        raise EstateError('address group %s: staging_delay_ms makes a group active at every datacentre, which needs '
                          'mode full_state and engine bridge (this group is %s on the %s engine)'
                          % (group['name'], mode, engine))
    if isinstance(delay, bool) or not isinstance(delay, int) or delay <= 0:
        raise EstateError('address group %s: staging_delay_ms must be a whole number of milliseconds above 0, got %r'
                          % (group['name'], delay))
    if group.get('owner'):
        raise EstateError('address group %s: a group with staging_delay_ms is active at every datacentre, so it has '
                          'no owner (got owner %r)' % (group['name'], group['owner']))
    return delay


def is_active_everywhere(group):
    """A normalised group that every datacentre serves at once (a staging delay instead of an owner)."""
    return group['staging_delay_ms'] is not None


def _is_owned(group):
    """A normalised full_state group that one datacentre owns: staged and fenced elsewhere, swapped over, probed."""
    return group['mode'] == FULL_STATE and not is_active_everywhere(group)


def _check_bridge_group(name, addresses):
    if not addresses:
        raise EstateError('address group %s: engine bridge needs the group\'s address prefixes (a catch-all group '
                          'without addresses is mirrored)' % name)
    for prefix in addresses:
        if not prefix.endswith('.') or '#' in prefix or '*' in prefix:
            raise EstateError('address group %s: engine bridge copies addresses by the wildcard <prefix>#, so each '
                              'prefix must end with "." and hold no wildcard (got %r)' % (name, prefix))


def owned_groups(groups, datacentres, active_datacentre):
    """{datacentre: [names of the full_state groups it owns]}, every datacentre present."""
    owned = dict((datacentre, []) for datacentre in datacentres)
    for group in normalise_groups(groups, active_datacentre):
        if _is_owned(group):
            if group['owner'] not in owned:
                raise EstateError('address group %s: owner %r is not one of the datacentres %s'
                                  % (group['name'], group['owner'], ', '.join(datacentres)))
            owned[group['owner']].append(group['name'])
    return owned


def full_state_groups(groups):
    """The names of the full_state groups that one datacentre owns (the ones the others stage, and that a datacentre
    fences and activates); not those active everywhere."""
    return [group['name'] for group in normalise_groups(groups, None) if _is_owned(group)]


def full_state_mirror_groups(groups, names):
    """Those of the groups ``names`` that are full_state on the mirror engine (acknowledgements cross)."""
    return [group['name'] for group in normalise_groups(groups, None)
            if group['name'] in names and group['engine'] == MIRROR and group['mode'] == FULL_STATE]


def group_of_address(groups, address, active_datacentre):
    """The (normalised) group an address belongs to: the one with the longest of its prefixes that the address
    starts with, else the catch-all group (no prefixes), else None."""
    best, best_length = None, -1
    for group in normalise_groups(groups, active_datacentre):
        for prefix in group['addresses'] or ['']:
            if address.startswith(prefix) and len(prefix) > best_length and (prefix or not group['addresses']):
                best, best_length = group, len(prefix)
    return best


def prefix_entries(groups, staged_groups):
    """Per prefix of every group (``""`` for the catch-all group): its group and whether it is staged (its group is
    one of ``staged_groups``)."""
    return [{'prefix': prefix, 'group': group['name'], 'staged': group['name'] in staged_groups}
            for group in normalise_groups(groups, None) for prefix in group['addresses'] or ['']]


def fence_staging(groups):
    """Per owned group, the prefix entries that fence it alone (artemis_security.site_settings for a passive
    datacentre): what the broker plugin's activation check applies when a group's newest activation record names
    another datacentre."""
    return dict((group['name'], prefix_entries(groups, [group['name']]))
                for group in normalise_groups(groups, None) if _is_owned(group))


def staging(groups, datacentre, active_datacentre):
    """The staging entries of one datacentre: its replicated copies wait undeliverable under the prefixes of every
    full_state group it does not own."""
    staged = [group['name'] for group in normalise_groups(groups, active_datacentre)
              if _is_owned(group) and group['owner'] != datacentre]
    return prefix_entries(groups, staged)


def peer_roles(groups, datacentre):
    """What the brokers of the other datacentres may do at a broker of ``datacentre`` (``[{name, match,
    permissions}]``, the broker role's ``broker_peer_roles``): a mirror only sends to its store-and-forward address
    there (named after the connection: the datacentre and the group), and the target applies messages,
    acknowledgements and queue changes itself; a bridge sends to its group's inbound address and, through the broker
    plugin, to the group's own addresses. Nothing else is granted."""
    roles = []
    for group in normalise_groups(groups, None):
        roles.append({'name': REPLICATION_ROLE, 'match': '%s%s_%s' % (MIRROR_QUEUE_PREFIX, datacentre, group['name']),
                      'permissions': ['send']})
        if group['engine'] == BRIDGE:
            roles.append({'name': REPLICATION_ROLE, 'match': inbound_address(group['name']), 'permissions': ['send']})
            if is_active_everywhere(group):
                roles.append({'name': REPLICATION_ROLE, 'match': notice_address(group['name']),
                              'permissions': ['send']})
            roles += [{'name': REPLICATION_ROLE, 'match': prefix + '#', 'permissions': list(BRIDGE_PEER_PERMISSIONS)}
                      for prefix in group['addresses']]
    roles.append({'name': REPLICATION_ROLE, 'match': ACTIVATION_ADDRESS, 'permissions': ['browse']})
    return roles


def _address_filter(group, groups):
    """The mirror's address-filter: the group's prefixes, or for the catch-all group every other group's excluded,
    and the bridge engine's own addresses when a group uses it (each datacentre's are its own: mirrored, a remote
    datacentre's bridge of the same name would forward them again)."""
    if group['addresses']:
        return ','.join(group['addresses'])
    # Each broker keeps the activation records artemis_site sends it: mirrored, a record would reach a datacentre
    # that the operation could not reach (the very one it must tell apart).
    excluded = [prefix for other in groups for prefix in other['addresses']] + [ACTIVATION_ADDRESS]
    if any(other['engine'] == BRIDGE for other in groups):
        excluded += [OUTBOUND_QUEUE_PREFIX, INBOUND_ADDRESS_PREFIX, EXPORT_QUEUE_PREFIX]
    if any(is_active_everywhere(other) for other in groups):
        excluded.append(ACK_NOTICE_PREFIX)
    return ','.join('!' + prefix for prefix in excluded)


def mirror_connection_name(target, group_name):
    """What Artemis calls the mirror connection of a group to ``target`` (its store-and-forward queue follows it)."""
    return '%s_%s' % (target, group_name)


def bridge_link_name(group_name, target):
    """The name of the bridge of a group to ``target``, and of its outbound queue."""
    return '%s%s.%s' % (OUTBOUND_QUEUE_PREFIX, group_name, target)


def mirror_connections(groups, datacentres, active_datacentre):
    """Every mirror connection of the estate: ``name`` (what Artemis calls it, ``<target>_<group>``), ``source`` and
    ``target`` datacentre, ``group``, ``mode``, ``message_acknowledgements`` and ``address_filter``.
    Each broker of ``source`` runs it towards every broker of ``target``."""
    normalised = normalise_groups(groups, active_datacentre)
    connections = []
    for source in datacentres:
        for target in datacentres:
            if target == source:
                continue
            for group in normalised:
                if group['engine'] != MIRROR or group['owner'] not in (source, target):
                    continue
                connections.append({'name': mirror_connection_name(target, group['name']), 'source': source,
                                    'target': target,
                                    'group': group['name'], 'mode': group['mode'],
                                    'message_acknowledgements': group['mode'] == FULL_STATE,
                                    'address_filter': _address_filter(group, normalised)})
    return connections


def relayed_after_swapover(groups, datacentres, active_datacentre, group_names, target):
    """{group: datacentres} for the mirror groups of ``group_names`` once ``target`` is active for them: the other
    datacentres that ``target`` has no mirror connection to (a star around the inventory's owner, three or more
    datacentres). They get the target's events only as the owner relays them, and Artemis does not relay an
    acknowledgement the owner had to retry, so under load they keep consumed messages until the connections follow
    the new owner (site.yml with it)."""
    connected = set((link['source'], link['target'], link['group'])
                    for link in mirror_connections(groups, datacentres, active_datacentre))
    relayed = {}
    for group in normalise_groups(groups, active_datacentre):
        if group['engine'] != MIRROR or group['name'] not in group_names:
            continue
        behind = [datacentre for datacentre in datacentres
                  if datacentre != target and (target, datacentre, group['name']) not in connected]
        if behind:
            relayed[group['name']] = behind
    return relayed


def bridge_links(groups, datacentres, active_datacentre):
    """Every bridge of the estate, one per (source datacentre, remote datacentre, bridge group): ``name`` (of the
    bridge and of its outbound queue), ``source``, ``target``, ``group``, ``diverts`` (``name`` and ``address``, the
    wildcard of one of the group's prefixes, that copy into the outbound queue what has no ORIGIN_PROPERTY: what was
    produced at ``source``) and ``inbound`` (the address at ``target`` the bridge delivers to). Each live broker of
    ``source`` runs it towards the brokers of ``target``. A divert per remote datacentre, not a queue on the
    wildcard: anycast queues of one address share its messages, diverts each get a copy."""
    bridged = [group for group in normalise_groups(groups, active_datacentre) if group['engine'] == BRIDGE]
    links = []
    for source in datacentres:
        for target in datacentres:
            if target == source:
                continue
            for group in bridged:
                links.append({'name': bridge_link_name(group['name'], target), 'source': source,
                              'target': target, 'group': group['name'], 'inbound': inbound_address(group['name']),
                              'diverts': [{'name': '%s%s.%s.%s' % (DIVERT_PREFIX, group['name'], target, index),
                                           'address': address}
                                          for index, address in enumerate(_diverted_addresses(group))]})
    return links


def _diverted_addresses(group):
    """What a bridge group's diverts copy into its outbound queues: the wildcard of each prefix, and the group's notice
    address when it is active everywhere (a notice then follows the copies it concerns through the same queue, so it
    never arrives before its copy)."""
    return [prefix + '#' for prefix in group['addresses']] + (
        [notice_address(group['name'])] if is_active_everywhere(group) else [])


def staging_delays(groups):
    """Per prefix of every group active everywhere: ``{prefix, delay_ms, group}``, for the broker plugin, which
    schedules a copy arriving under the prefix for the original's production time plus the delay."""
    return [{'prefix': prefix, 'delay_ms': group['staging_delay_ms'], 'group': group['name']}
            for group in normalise_groups(groups, None) if is_active_everywhere(group)
            for prefix in group['addresses']]


def identity_prefixes(groups, names=None):
    """The prefixes of the full_state bridge groups (of those named ``names``, if given), under which the broker
    plugin stamps each message's identity (SOURCE_ID_PROPERTY) and a swapover reconciles the target's queues with
    the source's: acknowledgements do not cross a bridge."""
    return [prefix for group in normalise_groups(groups, None) if group['engine'] == BRIDGE
            and group['mode'] == FULL_STATE and (names is None or group['name'] in names)
            for prefix in group['addresses']]


def bridge_reconciliations(groups, datacentres, active_datacentre):
    """What a periodic reconciliation runs: per full_state bridge group, from its owner (``source``) to every other
    datacentre (``target``), which removes the copies of what the owner consumed."""
    return [{'group': group['name'], 'source': group['owner'], 'target': datacentre}
            for group in normalise_groups(groups, active_datacentre)
            if group['engine'] == BRIDGE and _is_owned(group)
            for datacentre in datacentres if datacentre != group['owner']]


def uncompared_prefixes(groups):
    """The prefixes whose queues differ between datacentres by design, so never compared by count: the messages_only
    groups' (each datacentre consumes its own copy) and the full_state bridge groups' (the target keeps copies of
    what the source consumed until a swapover reconciles them)."""
    return [prefix for group in normalise_groups(groups, None) if group['mode'] == MESSAGES_ONLY
            for prefix in group['addresses']] + identity_prefixes(groups)


def drain_scope(groups, swapped, datacentres):
    """What a swapover's drain waits for: the backlog of the ``swapped`` groups' mirror connections and bridges
    (``links``, by name) and the counts of their queues only (the clients of every other group go on acting
    meanwhile, so their backlogs and counts move), never those of uncompared_prefixes. ``links``,
    ``include_prefixes``, ``exclude_prefixes`` and ``compare_queues`` (false when none of the swapped groups' queues
    can be compared) for artemis_drain_check."""
    normalised = normalise_groups(groups, None)
    uncompared = uncompared_prefixes(groups)
    links = sorted(mirror_connection_name(target, group['name']) if group['engine'] == MIRROR
                   else bridge_link_name(group['name'], target)
                   for group in normalised if group['name'] in swapped for target in datacentres)
    if any(not group['addresses'] and group['name'] in swapped for group in normalised):
        # The catch-all group is swapped: every address but the other groups' prefixes.
        others = [prefix for group in normalised if group['name'] not in swapped for prefix in group['addresses']]
        return {'links': links, 'include_prefixes': [], 'exclude_prefixes': sorted(set(uncompared + others)),
                'compare_queues': True}
    included = sorted(prefix for group in normalised if group['name'] in swapped for prefix in group['addresses']
                      if prefix not in uncompared)
    return {'links': links, 'include_prefixes': included, 'exclude_prefixes': sorted(uncompared),
            'compare_queues': bool(included)}


def inbound_address(group_name):
    """Where a bridge of the group delivers its copies at the remote datacentre."""
    return INBOUND_ADDRESS_PREFIX + group_name


def notice_address(group_name):
    """Where the broker plugin sends the notices of acknowledgements of a group active everywhere."""
    return ACK_NOTICE_PREFIX + group_name


def exports(groups, external_brokers, datacentres, active_datacentre):
    """Every export to a broker outside the estate, one per (external broker, declared address): ``name`` (of the
    bridge and of its export queue), ``divert``, ``broker``, ``address``, ``routing_type`` and ``group``. Every live
    broker of every datacentre runs each of them for the messages produced there (no ORIGIN_PROPERTY), so each
    message reaches the external broker once, whichever datacentre took it. Only addresses of ``bridge`` groups: the
    copies leave by the bridge engine's mechanism, and a mirror group's messages are not diverted."""
    normalised = normalise_groups(groups, active_datacentre)
    found, seen = [], set()
    for broker in external_brokers or []:
        name = broker.get('name') if isinstance(broker, dict) else None
        if not name or not isinstance(name, str) or any(char in name for char in '.#*/ '):
            # Never the whole entry: it holds a password.
            raise EstateError('every external broker needs a name without ".", "#", "*", "/" or spaces, got %r'
                              % (name,))
        if name in seen or name in datacentres:
            raise EstateError('external broker %s: its name is already %s' % (
                name, 'a datacentre' if name in datacentres else 'taken by another external broker'))
        seen.add(name)
        addresses = broker.get('addresses') or []
        if not addresses:
            raise EstateError('external broker %s: addresses is empty; name the addresses it receives' % name)
        for index, entry in enumerate(addresses):
            address = entry.get('name') if isinstance(entry, dict) else entry
            routing_type = (entry.get('routing_type') if isinstance(entry, dict) else None) or 'anycast'
            if not address or not isinstance(address, str) or '#' in address or '*' in address:
                raise EstateError('external broker %s: addresses[%s] must be an address without wildcards, got %r'
                                  % (name, index, entry))
            if routing_type not in ROUTING_TYPES:
                raise EstateError('external broker %s: address %s: routing_type %r is not one of %s'
                                  % (name, address, routing_type, ', '.join(ROUTING_TYPES)))
            group = group_of_address(normalised, address, active_datacentre)
            if group is None or group['engine'] != BRIDGE:
                raise EstateError('external broker %s: address %s is in %s, but only the addresses of an engine '
                                  'bridge group can go to a broker outside the estate'
                                  % (name, address, 'address group %s (engine %s)' % (group['name'], group['engine'])
                                     if group else 'no address group'))
            found.append({'name': '%s%s.%s' % (EXPORT_QUEUE_PREFIX, name, index),
                          'divert': '%s%s.%s' % (EXPORT_DIVERT_PREFIX, name, index), 'broker': name,
                          'address': address, 'routing_type': routing_type, 'group': group['name']})
    return found


def replication_links(groups, datacentres, active_datacentre):
    """Every mirror connection and bridge of the estate as ``source`` (the datacentre whose brokers run it), ``name``
    (as the brokers list it) and ``target`` (the datacentre it leads to)."""
    links = mirror_connections(groups, datacentres, active_datacentre) + bridge_links(groups, datacentres,
                                                                                      active_datacentre)
    return [{'source': link['source'], 'name': link['name'], 'target': link['target']} for link in links]


def link_targets(groups, datacentres, active_datacentre):
    """{(source datacentre, link name): target datacentre} of every mirror connection and bridge, for reading the
    brokers' lists of them."""
    return dict(((link['source'], link['name']), link['target'])
                for link in replication_links(groups, datacentres, active_datacentre))


def probe_routes(groups, datacentres, active_datacentre):
    """A canary route per full_state group: from its owner to every other datacentre, on the probe address under the
    group's first prefix."""
    routes = []
    for group in normalise_groups(groups, active_datacentre):
        if _is_owned(group):
            routes.append({'group': group['name'], 'address': (group['addresses'] or [''])[0] + PROBE_ADDRESS,
                           'source': group['owner'],
                           'targets': [datacentre for datacentre in datacentres if datacentre != group['owner']]})
    return routes


def restart_order(brokers, groups, datacentres, active_datacentre, pending=None):
    """The order in which to restart brokers so that clients keep a live broker and no event loses its way: first the
    datacentres whose brokers do not run all of their mirror connections yet (after the owner moved, the new owner's
    connections to the others: until they run, the others get its events only as the previous owner relays them, and
    that stops at the previous owner's restart) or cannot say (no live broker now: a broker that is down may be one
    of them), then the datacentres that own no full_state group, then the owners (in the order of ``datacentres``);
    after all of them the datacentres whose pending settings stop a mirror connection they route (the previous
    owner), whatever their brokers report now; one datacentre after the other; inside a datacentre every broker that
    is not live now (a backup, or one that is down) before the live one.

    ``brokers``: ``{name, datacentre, live, links}`` (``live`` as the broker reports it now, unknown counts as not
    live; ``links`` as artemis_replication_info reports them, a live broker's mirror connections among them).
    ``pending``: ``{name: reasons}``, each broker's pending restart (a reason that begins with STOPS_ROUTING_REASON
    puts its datacentre last). Returns the broker names in order."""
    owned = owned_groups(groups, datacentres, active_datacentre)
    unknown = sorted(set(broker['datacentre'] for broker in brokers) - set(datacentres))
    if unknown:
        raise EstateError('brokers of unknown datacentres %s (datacentres: %s)'
                          % (', '.join(unknown), ', '.join(datacentres)))
    planned = dict((datacentre, set()) for datacentre in datacentres)
    for connection in mirror_connections(groups, datacentres, active_datacentre):
        planned[connection['source']].add(connection['name'])
    reporting = [broker for broker in brokers if broker.get('live') and 'links' in broker]
    gaining = set(broker['datacentre'] for broker in reporting
                  if planned[broker['datacentre']] - set(link['name'] for link in broker['links']
                                                         if link.get('engine', MIRROR) == MIRROR))
    gaining |= set(broker['datacentre'] for broker in brokers) - set(broker['datacentre'] for broker in reporting)
    stopping = set(broker['datacentre'] for broker in brokers
                   if any(reason.startswith(STOPS_ROUTING_REASON)
                          for reason in (pending or {}).get(broker['name'], ())))
    ordered_datacentres = sorted(datacentres, key=lambda dc: (dc in stopping, dc not in gaining, bool(owned[dc])))
    order = []
    for datacentre in ordered_datacentres:
        members = [broker for broker in brokers if broker['datacentre'] == datacentre]
        order += [broker['name'] for broker in members if not broker.get('live')]
        order += [broker['name'] for broker in members if broker.get('live')]
    return order


def model(groups, datacentres, active_datacentre, external_brokers=None):
    """Everything the address groups (and the exports to ``external_brokers``) mean for the datacentres, as one
    mapping: what the replication role derives each broker's plan from (artemis_broker_plan) and what the playbooks
    publish."""
    return {
        'groups': normalise_groups(groups, active_datacentre),
        'datacentres': list(datacentres),
        'owned_groups': owned_groups(groups, datacentres, active_datacentre),
        'staging': dict((datacentre, staging(groups, datacentre, active_datacentre)) for datacentre in datacentres),
        'mirror_connections': mirror_connections(groups, datacentres, active_datacentre),
        'bridge_links': bridge_links(groups, datacentres, active_datacentre),
        'links': replication_links(groups, datacentres, active_datacentre),
        'exports': exports(groups, external_brokers, datacentres, active_datacentre),
        'origin_property': ORIGIN_PROPERTY,
        'inbound_prefix': INBOUND_ADDRESS_PREFIX,
        'identity_prefixes': identity_prefixes(groups),
        'staging_delays': staging_delays(groups),
        'notice_prefix': ACK_NOTICE_PREFIX,
        'uncompared_prefixes': uncompared_prefixes(groups),
        'bridge_reconciliations': bridge_reconciliations(groups, datacentres, active_datacentre),
        'probe_routes': probe_routes(groups, datacentres, active_datacentre),
        'peer_roles': dict((datacentre, peer_roles(groups, datacentre)) for datacentre in datacentres),
        'replication_role': REPLICATION_ROLE,
        'fence_staging': fence_staging(groups),
        'activation_address': ACTIVATION_ADDRESS,
        'activation_group_property': ACTIVATION_GROUP_PROPERTY,
    }
