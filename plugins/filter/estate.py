# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that give playbooks and roles the estate model of module_utils/artemis_estate.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_estate


def estate(address_groups, datacentres, active_datacentre, external_brokers=None):
    """Everything the address groups (and the exports to ``external_brokers``) mean for the datacentres, as one
    mapping."""
    try:
        return {
            'groups': artemis_estate.normalise_groups(address_groups, active_datacentre),
            'owned_groups': artemis_estate.owned_groups(address_groups, datacentres, active_datacentre),
            'staging': dict((datacentre, artemis_estate.staging(address_groups, datacentre, active_datacentre))
                            for datacentre in datacentres),
            'mirror_connections': artemis_estate.mirror_connections(address_groups, datacentres, active_datacentre),
            'bridge_links': artemis_estate.bridge_links(address_groups, datacentres, active_datacentre),
            'links': artemis_estate.replication_links(address_groups, datacentres, active_datacentre),
            'exports': artemis_estate.exports(address_groups, external_brokers, datacentres, active_datacentre),
            'origin_property': artemis_estate.ORIGIN_PROPERTY,
            'inbound_prefix': artemis_estate.INBOUND_ADDRESS_PREFIX,
            'identity_prefixes': artemis_estate.identity_prefixes(address_groups),
            'staging_delays': artemis_estate.staging_delays(address_groups),
            'notice_prefix': artemis_estate.ACK_NOTICE_PREFIX,
            'uncompared_prefixes': artemis_estate.uncompared_prefixes(address_groups),
            'bridge_reconciliations': artemis_estate.bridge_reconciliations(address_groups, datacentres,
                                                                            active_datacentre),
            'probe_routes': artemis_estate.probe_routes(address_groups, datacentres, active_datacentre),
            'peer_roles': dict((datacentre, artemis_estate.peer_roles(address_groups, datacentre))
                               for datacentre in datacentres),
            'replication_role': artemis_estate.REPLICATION_ROLE,
            'fence_staging': artemis_estate.fence_staging(address_groups),
            'activation_address': artemis_estate.ACTIVATION_ADDRESS,
            'activation_group_property': artemis_estate.ACTIVATION_GROUP_PROPERTY,
        }
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('estate: %s' % exc)


def restart_order(brokers, address_groups, datacentres, active_datacentre):
    try:
        return artemis_estate.restart_order(brokers, address_groups, datacentres, active_datacentre)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('restart_order: %s' % exc)


def address_group(address, address_groups, active_datacentre):
    try:
        return artemis_estate.group_of_address(address_groups, address, active_datacentre)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('address_group: %s' % exc)


def relayed_after_swapover(address_groups, datacentres, active_datacentre, group_names, target):
    try:
        return artemis_estate.relayed_after_swapover(address_groups, datacentres, active_datacentre, group_names,
                                                     target)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('relayed_after_swapover: %s' % exc)


def drain_scope(address_groups, swapped, datacentres):
    try:
        return artemis_estate.drain_scope(address_groups, swapped, datacentres)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('drain_scope: %s' % exc)


class FilterModule:
    def filters(self):
        return {'estate': estate, 'restart_order': restart_order, 'address_group': address_group,
                'relayed_after_swapover': relayed_after_swapover, 'drain_scope': drain_scope}
