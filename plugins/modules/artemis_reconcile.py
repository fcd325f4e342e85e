#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_reconcile
short_description: Put the mirrored messages a passive datacentre kept into their queues, where the source still holds them
version_added: 0.3.0
description:
  - "A passive datacentre keeps on C(continuity.kept) the mirrored messages that found no queue (their queue was
    created at runtime and the mirror delivered them before its creation; see C(docs/upstream/)). This module
    settles each kept message of O(datacentre) whose original address has a queue now:"
  - "It is put into each queue of that address in which the source broker still holds it, and only there. The
    source is the live broker whose node id the message carries (C(x-opt-amq-bkr-id)); the source's own id of the
    message (C(x-opt-amq-mr-id)) is matched against the messages of the source's queue of the same name. Both
    survive Artemis's dead-letter copy and the move, so the source's later acknowledgement still removes the copy."
  - "A queue that already holds a message with the same identity is not given another one (no duplicate)."
  - "It is discarded when the source holds it in none of the queues (consumed there), with the reason."
  - "It stays kept (C(pending), with the reason) while its address has no queue, its source broker does not
    answer, or it does not come from a mirror."
  - "Decisions are as exact as the source's state: run it while the source's clients are fenced (the swapover
    does, after the drain). While they consume, a message acknowledged at the source between the look and the move
    may stay at the target."
extends_documentation_fragment:
  - continuity.artemis.management
options:
  datacentre:
    description: The datacentre whose kept messages are settled. O(brokers) must include the source datacentres.
    type: str
    required: true
attributes:
  check_mode:
    support: full
    description: Decides and reports, moves and discards nothing.
  diff_mode:
    support: none
    description: Lists what it moved and discarded in its result instead.
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Settle what frankfurt kept, after the drain of a swapover from london
  continuity.artemis.artemis_reconcile:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    datacentre: frankfurt
  delegate_to: localhost
  run_once: true
  register: reconciled
'''

RETURN = r'''
kept:
  description: Messages kept at the datacentre before the run.
  returned: always
  type: int
reconciled:
  description: Messages put into their queues (one entry per queue), with C(broker), C(address), C(queue),
    C(source_node) and C(source_message_id).
  returned: always
  type: list
  elements: dict
discarded:
  description: Kept messages removed, with C(reason) (C(consumed at the source), C(already in every queue)).
  returned: always
  type: list
  elements: dict
pending:
  description: Kept messages left as they are, with C(reason).
  returned: always
  type: list
  elements: dict
not_answering:
  description: Brokers of the datacentre that did not answer and were left out (a backup that is down, a broker
    starting). Named so because Ansible reserves C(skipped) for a boolean.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import (
    KEPT_ADDRESS, ORIGINAL_ADDRESS_PROPERTY, SOURCE_MESSAGE_ID_PROPERTY, SOURCE_NODE_PROPERTY)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, BrokerNotReady, BrokerUnreachable, ManagementError, MBeanNotFound, management_argument_spec,
    require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import is_application_queue


def identity_filter(node, message_id):
    """An Artemis filter for the messages a mirror delivered from ``node``'s message ``message_id``."""
    return '"%s" = %d AND "%s" = \'%s\'' % (SOURCE_MESSAGE_ID_PROPERTY, message_id, SOURCE_NODE_PROPERTY,
                                            node.replace("'", "''"))


class Sources(object):
    """The live brokers of the other datacentres, by node id, and the message ids their queues hold (read once)."""

    def __init__(self, clients):
        self.by_node = {}
        for client in clients:
            try:
                status = client.status()
            except (BrokerUnreachable, BrokerNotReady):
                continue
            if status['live']:
                self.by_node[status['node_id']] = client
        self._held = {}

    def holds(self, node, queue):
        """The message ids of ``node``'s queue (none when it has no such queue)."""
        if (node, queue['name']) not in self._held:
            client = self.by_node[node]
            try:
                ids = set(row['messageID'] for row in client.browse(queue['address'], queue['name'],
                                                                    routing_type=queue['routingType'].lower()))
            except MBeanNotFound:
                ids = set()
            self._held[(node, queue['name'])] = ids
        return self._held[(node, queue['name'])]


def settle(message, queues, sources, target):
    """What to do with one kept message: ('pending', reason, []), ('discard', reason, []) or ('put', '', [the
    queues to put it into])."""
    properties = message['properties']
    node, source_id = properties.get(SOURCE_NODE_PROPERTY), properties.get(SOURCE_MESSAGE_ID_PROPERTY)
    if node is None or source_id is None:
        return 'pending', 'not delivered by a mirror (no source identity)', []
    if not queues:
        return 'pending', 'its address has no queue yet', []
    if node not in sources.by_node:
        return 'pending', 'its source broker (node %s) is not a live broker that answers' % node, []
    holding = [queue for queue in queues if int(source_id) in sources.holds(node, queue)]
    if not holding:
        return 'discard', 'consumed at the source', []
    missing = [queue for queue in holding if not target.count_messages(
        queue['address'], queue['name'], identity_filter(node, int(source_id)),
        routing_type=queue['routingType'].lower())]
    if not missing:
        return 'discard', 'already in every queue', []
    return 'put', '', missing


def reconcile_broker(module, client, sources, outcome):
    kept = client.browse(KEPT_ADDRESS, KEPT_ADDRESS)
    outcome['kept'] += len(kept)
    if not kept:
        return
    queues_by_address = {}
    for queue in client.queues():
        if is_application_queue(queue):
            queues_by_address.setdefault(queue['address'], []).append(queue)
    for message in kept:
        address = message['properties'].get(ORIGINAL_ADDRESS_PROPERTY)
        entry = {'broker': client.name, 'address': address, 'kept_message_id': message['messageID'],
                 'source_node': message['properties'].get(SOURCE_NODE_PROPERTY),
                 'source_message_id': message['properties'].get(SOURCE_MESSAGE_ID_PROPERTY)}
        action, reason, into = settle(message, queues_by_address.get(address, []), sources, client)
        if action == 'pending':
            outcome['pending'].append(dict(entry, reason=reason))
            continue
        if action == 'discard':
            if not module.check_mode:
                client.remove_message(KEPT_ADDRESS, KEPT_ADDRESS, message['messageID'])
            outcome['discarded'].append(dict(entry, reason=reason))
            continue
        for index, queue in enumerate(into):
            if not module.check_mode:
                put = client.move_message if index == len(into) - 1 else client.copy_message
                put(KEPT_ADDRESS, KEPT_ADDRESS, message['messageID'], queue['name'])
            outcome['reconciled'].append(dict(entry, queue=queue['name']))


def run_module(module, client_for=ArtemisManagement.from_params):
    params = module.params
    datacentres = sorted(set(broker['datacentre'] for broker in params['brokers']))
    if params['datacentre'] not in datacentres:
        module.fail_json(msg='datacentre %r has no broker in brokers (datacentres: %s)'
                         % (params['datacentre'], ', '.join(datacentres)))
    outcome = {'kept': 0, 'reconciled': [], 'discarded': [], 'pending': [], 'not_answering': []}
    try:
        sources = Sources([client_for(broker, params) for broker in params['brokers']
                           if broker['datacentre'] != params['datacentre']])
        for broker in params['brokers']:
            if broker['datacentre'] != params['datacentre']:
                continue
            client = client_for(broker, params)
            try:
                live = client.status()['live']
            except (BrokerUnreachable, BrokerNotReady) as exc:
                outcome['not_answering'].append('%s (%s)' % (broker['name'], exc))
                continue
            if live and KEPT_ADDRESS in client.queue_names():
                reconcile_broker(module, client, sources, outcome)
    except ManagementError as exc:
        module.fail_json(msg='%s (what was done so far is in the result)' % exc, **outcome)
    module.exit_json(changed=bool(outcome['reconciled'] or outcome['discarded']), **outcome)


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(datacentre=dict(type='str', required=True))
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1)
    run_module(module)


if __name__ == '__main__':
    main()
