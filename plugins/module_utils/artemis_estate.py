# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The estate model: what each address group means for every datacentre, in one place.

A group belongs to its ``owner`` (else the active datacentre) and is ``full_state`` unless it says
``messages_only``. A full_state group is staged wherever it is not owned. The owner mirrors a group to every other
datacentre and each of those mirrors it back (no link between two non-owners: Artemis would relay the owner's
events from one to the other). The replication role and the playbooks read this through the
``continuity.artemis.estate_*`` filters; the modules and the measurement import it.
"""

from __future__ import annotations

FULL_STATE = 'full_state'
MESSAGES_ONLY = 'messages_only'
MODES = (FULL_STATE, MESSAGES_ONLY)

# Artemis names a mirror's store-and-forward queue after the connection.
MIRROR_QUEUE_PREFIX = '$ACTIVEMQ_ARTEMIS_MIRROR_'
PROBE_ADDRESS = 'continuity.probe'


class EstateError(ValueError):
    """The inventory's datacentres or address groups do not make an estate; the message names what is wrong."""


def normalise_groups(groups, active_datacentre):
    """The groups with ``addresses``, ``mode`` and ``owner`` filled in (a new list; the input is not changed)."""
    normalised = []
    for group in groups:
        if not isinstance(group, dict) or not group.get('name'):
            raise EstateError('every address group needs a name, got %r' % (group,))
        mode = group.get('mode') or FULL_STATE
        if mode not in MODES:
            raise EstateError('address group %s: mode %r is not one of %s' % (group['name'], mode, ', '.join(MODES)))
        normalised.append({'name': group['name'], 'addresses': list(group.get('addresses') or []), 'mode': mode,
                           'owner': group.get('owner') or active_datacentre})
    return normalised


def owned_groups(groups, datacentres, active_datacentre):
    """{datacentre: [names of the full_state groups it owns]}, every datacentre present."""
    owned = dict((datacentre, []) for datacentre in datacentres)
    for group in normalise_groups(groups, active_datacentre):
        if group['mode'] == FULL_STATE:
            if group['owner'] not in owned:
                raise EstateError('address group %s: owner %r is not one of the datacentres %s'
                                  % (group['name'], group['owner'], ', '.join(datacentres)))
            owned[group['owner']].append(group['name'])
    return owned


def full_state_groups(groups):
    """The names of the full_state groups (the ones a datacentre stages, fences and activates)."""
    return [group['name'] for group in normalise_groups(groups, None) if group['mode'] == FULL_STATE]


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


def staging(groups, datacentre, active_datacentre):
    """The staging entries of one datacentre: its replicated copies wait undeliverable under the prefixes of every
    full_state group it does not own."""
    staged = [group['name'] for group in normalise_groups(groups, active_datacentre)
              if group['mode'] == FULL_STATE and group['owner'] != datacentre]
    return prefix_entries(groups, staged)


def _address_filter(group, groups):
    """The mirror's address-filter: the group's prefixes, or for the catch-all group every other group's excluded."""
    if group['addresses']:
        return ','.join(group['addresses'])
    return ','.join('!' + prefix for other in groups for prefix in other['addresses'])


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
                if group['owner'] not in (source, target):
                    continue
                connections.append({'name': '%s_%s' % (target, group['name']), 'source': source, 'target': target,
                                    'group': group['name'], 'mode': group['mode'],
                                    'message_acknowledgements': group['mode'] == FULL_STATE,
                                    'address_filter': _address_filter(group, normalised)})
    return connections


def link_targets(groups, datacentres, active_datacentre):
    """{(source datacentre, connection name): target datacentre}, for reading the brokers' connection lists."""
    return dict(((connection['source'], connection['name']), connection['target'])
                for connection in mirror_connections(groups, datacentres, active_datacentre))


def probe_routes(groups, datacentres, active_datacentre):
    """A canary route per full_state group: from its owner to every other datacentre, on the probe address under the
    group's first prefix."""
    routes = []
    for group in normalise_groups(groups, active_datacentre):
        if group['mode'] == FULL_STATE:
            routes.append({'group': group['name'], 'address': (group['addresses'] or [''])[0] + PROBE_ADDRESS,
                           'source': group['owner'],
                           'targets': [datacentre for datacentre in datacentres if datacentre != group['owner']]})
    return routes


def restart_order(brokers, groups, datacentres, active_datacentre):
    """The order in which to restart brokers so that clients keep a live broker: datacentres that own no full_state
    group first, then the owners (in the order of ``datacentres``); one datacentre after the other; inside a
    datacentre every broker that is not live now (a backup, or one that is down) before the live one.

    ``brokers``: ``{name, datacentre, live}`` (``live`` as the broker reports it now; unknown counts as not live).
    Returns the broker names in order."""
    owned = owned_groups(groups, datacentres, active_datacentre)
    unknown = sorted(set(broker['datacentre'] for broker in brokers) - set(datacentres))
    if unknown:
        raise EstateError('brokers of unknown datacentres %s (datacentres: %s)'
                          % (', '.join(unknown), ', '.join(datacentres)))
    ordered_datacentres = ([dc for dc in datacentres if not owned[dc]] + [dc for dc in datacentres if owned[dc]])
    order = []
    for datacentre in ordered_datacentres:
        members = [broker for broker in brokers if broker['datacentre'] == datacentre]
        order += [broker['name'] for broker in members if not broker.get('live')]
        order += [broker['name'] for broker in members if broker.get('live')]
    return order
