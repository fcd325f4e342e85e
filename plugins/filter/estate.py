# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that give playbooks and roles the estate model of module_utils/artemis_estate.py."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_broker_plan, artemis_estate


def estate(address_groups, datacentres, active_datacentre, external_brokers=None):
    """Everything the address groups (and the exports to ``external_brokers``) mean for the datacentres, as one
    mapping."""
    try:
        return artemis_estate.model(address_groups, datacentres, active_datacentre, external_brokers)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('estate: %s' % exc)


def estate_errors(address_groups, datacentres, active_datacentre, external_brokers=None):
    """What makes the address groups (and the exports to ``external_brokers``) no estate: [] when nothing does."""
    try:
        artemis_estate.model(address_groups, datacentres, active_datacentre, external_brokers)
    except artemis_estate.EstateError as exc:
        return [str(exc)]
    return []


def broker_plan(model, host, hosts, settings):
    """``host``'s part of the estate ``model`` (the estate filter's), with ``hosts`` per datacentre and the
    replication role's ``settings`` (module_utils/artemis_broker_plan.py)."""
    try:
        return artemis_broker_plan.broker_plan(model, host, hosts, settings)
    except artemis_estate.EstateError as exc:
        raise AnsibleFilterError('broker_plan: %s' % exc)


def restart_order(brokers, address_groups, datacentres, active_datacentre, pending=None):
    try:
        return artemis_estate.restart_order(brokers, address_groups, datacentres, active_datacentre, pending)
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
        return {'estate': estate, 'estate_errors': estate_errors, 'broker_plan': broker_plan,
                'restart_order': restart_order, 'address_group': address_group,
                'relayed_after_swapover': relayed_after_swapover, 'drain_scope': drain_scope}
