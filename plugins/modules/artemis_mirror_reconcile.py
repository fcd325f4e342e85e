#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_mirror_reconcile
short_description: Remove at the other datacentres the copies of what the source consumed, full_state groups on mirrors
version_added: 0.3.0
description:
  - "A C(full_state) mirror carries acknowledgements, but not every one arrives: with three or more datacentres the
    ones the new active site's events reach only through the old owner lose an acknowledgement that the owner had
    to retry (docs/engines.md), and one made while a datacentre's live broker was being replaced can be lost too.
    The copy it should have removed stays: a swapover's drain then refuses (queues out of sync), and a failover there
    would deliver it again."
  - "For each queue of the groups in which a datacentre holds more durable messages than the source, this module
    removes there every durable copy (a message the mirror brought, known by the node ID of the broker it was
    produced at and its id there) that the source's queue of the same name no longer holds. It reads the other
    datacentre first and the source twice after, so a copy still held, in delivery or just arriving at the source is
    kept, and it may run while the source's clients act."
  - "It never removes a message that was produced at the datacentre it is at (an original the source may never have
    received) nor a non-durable one (one the source may have lost in a crash without consuming it): those stay, and
    the swapover's drain says so."
  - "First it waits until every other datacentre has forwarded what its mirrors of the groups hold for the others
    (the old owner relays the source's events to the datacentres the source has no mirror connection to), so that no
    copy arrives after it looked; it fails, removing nothing, when they have not within O(timeout)."
  - "A datacentre that has no live broker that answers is skipped (RV(unanswered)), and nothing waits for the links
    towards it; the source must answer."
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.estate
options:
  source_datacentre:
    description: The datacentre whose queues are the truth (the swapover's fenced source).
    type: str
    required: true
  groups:
    description: Names of the groups to reconcile; those on the mirror engine in mode C(full_state) are, the others
      are ignored.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to wait for the other datacentres' mirrors of the groups to forward what they hold.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    description: Reads every datacentre and reports what it would remove.
  diff_mode:
    support: none
    description: The result lists each queue's counts instead.
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Drop at every other datacentre the copies of what london consumed
  continuity.artemis.artemis_mirror_reconcile:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    source_datacentre: london
    address_groups: "{{ replication_address_groups }}"
    groups: [all]
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
queues:
  description: Per datacentre and queue that held more durable messages than the source, C(datacentre), C(queue),
    C(held_at_source), C(held_before) and C(removed).
  returned: always
  type: list
  elements: dict
removed:
  description: Messages removed in all (would be removed, in check mode).
  returned: always
  type: int
unanswered:
  description: The datacentres skipped because no live broker of theirs answered.
  returned: always
  type: list
  elements: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import (
    MIRROR_IDENTITY, CopiesError, Datacentre)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    MIRROR_QUEUE_PREFIX, EstateError, drain_scope, estate_argument_spec, full_state_mirror_groups,
    mirror_connection_name)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, ManagementError, management_argument_spec, require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import is_application_queue


def durable_counts(datacentre):
    counts = {}
    for client in datacentre.live:
        for name, count in client.durable_message_counts().items():
            counts[name] = counts.get(name, 0) + count
    return counts


def relay_backlog(others, groups):
    """{datacentre: events its mirrors of ``groups`` still hold for another answering datacentre}, where any."""
    backlog = {}
    for datacentre in others.values():
        queues = set(MIRROR_QUEUE_PREFIX + mirror_connection_name(target, group)
                     for target in others if target != datacentre.name for group in groups)
        held = sum(int(queue['messageCount']) for client in datacentre.live for queue in client.queues()
                   if queue['name'] in queues)
        if held:
            backlog[datacentre.name] = held
    return backlog


def wait_for_relays(others, groups, timeout, clock=time):
    deadline = clock.monotonic() + timeout
    while True:
        backlog = relay_backlog(others, groups)
        if not backlog:
            return
        if clock.monotonic() >= deadline:
            raise CopiesError('the mirrors of %s still hold events for other datacentres after %ss: %s'
                              % (', '.join(groups), timeout, backlog))
        clock.sleep(1)


def reconcile_queue(module, name, source, other):
    held = other.messages(name, waiting_only=True)
    kept = source.identities(name) | source.identities(name)
    entry = {'datacentre': other.name, 'queue': name, 'held_at_source': len(kept), 'held_before': len(held),
             'removed': 0}
    for client, queue in other.queues[name]:
        removable = [message for holder, _queue, message in held if holder is client and message['durable']
                     and MIRROR_IDENTITY.is_copy(message)]
        if module.check_mode:
            entry['removed'] += len([message for message in removable
                                     if other.identity(client, message) not in kept])
            continue
        entry['removed'] += other.remove(client, queue, removable, kept)
    return entry


def run_module(module, client_for=ArtemisManagement.from_params, clock=time):
    params = module.params
    outcome = {'queues': [], 'removed': 0, 'unanswered': []}
    datacentres = sorted(set(broker['datacentre'] for broker in params['brokers']))
    try:
        mirrored = full_state_mirror_groups(params['address_groups'], params['groups'])
        scope = drain_scope(params['address_groups'], mirrored, datacentres)
    except EstateError as exc:
        module.fail_json(msg='address_groups: %s' % exc)
    if not mirrored or not scope['compare_queues']:
        module.exit_json(changed=False, **outcome)
    if params['source_datacentre'] not in datacentres:
        module.fail_json(msg='source_datacentre %r has no broker in brokers (datacentres: %s)'
                         % (params['source_datacentre'], ', '.join(datacentres)))

    def wanted(queue):
        return is_application_queue(queue, scope['include_prefixes'], scope['exclude_prefixes'])

    def datacentre(name):
        return Datacentre(name, [client_for(broker, params) for broker in params['brokers']
                                 if broker['datacentre'] == name], wanted, MIRROR_IDENTITY)
    try:
        source = datacentre(params['source_datacentre'])
        others = {}
        for name in datacentres:
            if name != source.name:
                try:
                    others[name] = datacentre(name)
                except CopiesError:
                    outcome['unanswered'].append(name)
        wait_for_relays(others, mirrored, params['timeout'], clock)
        at_source = durable_counts(source)
        for name, other in sorted(others.items()):
            for queue, count in sorted(durable_counts(other).items()):
                # A queue the source does not have is not this module's to empty.
                if queue in other.queues and queue in source.queues and count > at_source.get(queue, 0):
                    entry = reconcile_queue(module, queue, source, other)
                    outcome['queues'].append(entry)
                    outcome['removed'] += entry['removed']
    except (CopiesError, ManagementError) as exc:
        module.fail_json(msg='%s (what was done so far is in the result)' % exc, **outcome)
    module.exit_json(changed=bool(outcome['removed']), **outcome)


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(source_datacentre=dict(type='str', required=True),
                         groups=dict(type='list', elements='str', required=True),
                         timeout=dict(type='int', default=120))
    argument_spec.update(estate_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1)
    run_module(module)


if __name__ == '__main__':
    main()
