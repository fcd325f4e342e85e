#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_bridge_reconcile
short_description: Make a datacentre hold exactly what the source still holds, for full_state groups on bridges
version_added: 0.3.0
description:
  - "Acknowledgements do not cross a bridge: the target datacentre of an C(engine: bridge), C(full_state) group keeps
    a copy of every message the source accepted, consumed there or not. Before the target opens, this module removes
    from each queue of the group's prefixes at O(target_datacentre) every message the source's queue of the same name
    no longer holds, so that the swapover delivers exactly what the source had not consumed (0 lost, 0 duplicates)."
  - "A message is known everywhere by its identity: the datacentre it was produced at (C(continuity_origin), or the
    datacentre it is at for an original) and the source's message id (C(continuity_source_id), stamped by the
    collection's broker plugin; an original's own id when it has none). Scheduled messages count on both sides."
  - "The target's messages are removed by filter, a range of identities at a time (few calls when the source's
    consumers kept up); a message without C(continuity_source_id) (a large message, or one older than the group's
    engine) is removed by its id."
  - "With O(source_fenced) (the swapover's case): fails before removing anything when the source holds a message
    the target does not (the bridges have not delivered everything: run it after the drain), and after removing when
    the target does not hold exactly the source's messages then. Run it while the source is fenced and the target is
    not yet active. Without it, only what the source has consumed is removed (see O(source_fenced))."
  - "Refuses, changing nothing, when a datacentre has no live broker that answers (its message begins with
    C(Refused, nothing changed:))."
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.estate
options:
  source_datacentre:
    description: The datacentre that was active for the groups (fenced now).
    type: str
    required: true
  target_datacentre:
    description: The datacentre about to become active, whose copies are reconciled.
    type: str
    required: true
  groups:
    description: Names of the groups being swapped over; those on the bridge engine in mode C(full_state) are
      reconciled, the others ignored.
    type: list
    elements: str
    required: true
  source_fenced:
    description:
      - "V(true) (the swapover): the source's clients are fenced and its bridges drained; the target is made to hold
        exactly what the source holds, and the module fails when it cannot."
      - "V(false) (periodically, playbook C(reconcile.yml)): the source is active. Only the copies of what the source
        no longer holds are removed (read at the target first, then twice at the source, deliveries not yet
        acknowledged included); copies still on their way and new ones stay. This bounds the passive datacentres'
        journals and the duplicates an abrupt failover delivers."
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reads both datacentres and reports what it would remove.
  diff_mode:
    support: none
    description: The result lists each queue's counts instead.
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Drop at frankfurt the copies of what london consumed, before frankfurt opens
  continuity.artemis.artemis_bridge_reconcile:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    source_datacentre: london
    target_datacentre: frankfurt
    address_groups: "{{ replication_address_groups }}"
    groups: [orders]
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
queues:
  description: Per queue of the prefixes, C(queue), C(held_at_source), C(held_before) and C(removed) at the target,
    and C(consumed_at_target_before), the source's copies of the target's own messages that the target had consumed
    before a failover (left where they are; a later reconciliation from the new owner removes them).
  returned: always
  type: list
  elements: dict
removed:
  description: Messages removed at the target in all (would be removed, in check mode).
  returned: always
  type: int
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_copies import (
    BRIDGE_IDENTITY, CopiesError, Datacentre, DatacentreDark)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    EstateError, estate_argument_spec, identity_prefixes)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, ManagementError, management_argument_spec, require_at_least)


def reconcile_queue(module, name, source, target, source_fenced):
    if source_fenced:
        kept = source.identities(name)
        held = target.messages(name)
    else:
        # The source's clients act: look at the target first, so that whatever it holds had reached the source's
        # queue before the source is read, and read the source twice, so that a delivery rolled back between the
        # browse and the list of deliveries is seen.
        held = target.messages(name)
        kept = source.identities(name) | source.identities(name)
    unknown = kept - set(target.identity(client, message) for client, _queue, message in held)
    # The source's copies of the target's own originals that the target no longer holds: consumed at the target
    # before an abrupt failover took the group away (copies never cross back). They are not brought back.
    consumed_at_target = set(entry for entry in unknown if target.is_origin(entry[0]))
    missing = unknown - consumed_at_target
    if source_fenced and missing:
        raise CopiesError('queue %s: %s holds %d messages that %s does not (the bridges have not delivered '
                          'everything), for example %s' % (name, source.name, len(missing), target.name,
                                                           sorted(missing)[:3]))
    kept -= consumed_at_target
    entry = {'queue': name, 'held_at_source': len(kept), 'held_before': len(held), 'removed': 0,
             'consumed_at_target_before': len(consumed_at_target)}
    for client, queue in target.queues.get(name, []):
        messages = [message for holder, _queue, message in held if holder is client]
        if module.check_mode:
            entry['removed'] += len([message for message in messages
                                     if target.identity(client, message) not in kept])
            continue
        entry['removed'] += target.remove(client, queue, messages, kept)
    if source_fenced and not module.check_mode:
        after = sorted(target.identities(name))
        if after != sorted(kept):
            raise CopiesError('queue %s: after removing %d messages %s holds %d, not the %d %s holds'
                              % (name, entry['removed'], target.name, len(after), len(kept), source.name))
    return entry


def run_module(module, client_for=ArtemisManagement.from_params):
    params = module.params
    outcome = {'queues': [], 'removed': 0}
    try:
        prefixes = identity_prefixes(params['address_groups'], params['groups'])
    except EstateError as exc:
        module.fail_json(msg='address_groups: %s' % exc)
    if not prefixes:
        module.exit_json(changed=False, **outcome)
    datacentres = sorted(set(broker['datacentre'] for broker in params['brokers']))
    for option in ('source_datacentre', 'target_datacentre'):
        if params[option] not in datacentres:
            module.fail_json(msg='%s %r has no broker in brokers (datacentres: %s)'
                             % (option, params[option], ', '.join(datacentres)))
    if params['source_datacentre'] == params['target_datacentre']:
        module.fail_json(msg='source_datacentre and target_datacentre are both %r' % params['source_datacentre'])

    def datacentre(name):
        return Datacentre(name, [client_for(broker, params) for broker in params['brokers']
                                 if broker['datacentre'] == name],
                          lambda queue: queue['address'].startswith(tuple(prefixes)), BRIDGE_IDENTITY)
    try:
        source, target = datacentre(params['source_datacentre']), datacentre(params['target_datacentre'])
    except DatacentreDark as exc:
        # Nothing was read or removed yet: the collection's refusal, which the periodic reconcile.yml meets whenever
        # a datacentre is down or its broker still starting (chaos 3 x 1 seed 6, reconcile-33).
        module.fail_json(msg='Refused, nothing changed: %s' % exc, **outcome)
    except ManagementError as exc:
        module.fail_json(msg='%s (nothing was removed)' % exc, **outcome)
    try:
        for name in sorted(set(source.queues) | set(target.queues)):
            entry = reconcile_queue(module, name, source, target, params['source_fenced'])
            outcome['queues'].append(entry)
            outcome['removed'] += entry['removed']
    except (CopiesError, ManagementError) as exc:
        module.fail_json(msg='%s (what was done so far is in the result)' % exc, **outcome)
    module.exit_json(changed=bool(outcome['removed']), **outcome)


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(source_datacentre=dict(type='str', required=True),
                         target_datacentre=dict(type='str', required=True),
                         groups=dict(type='list', elements='str', required=True),
                         source_fenced=dict(type='bool', default=True))
    argument_spec.update(estate_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1)
    run_module(module)


if __name__ == '__main__':
    main()
