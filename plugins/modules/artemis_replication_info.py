#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_replication_info
short_description: Report the replication state of Artemis brokers across datacentres
version_added: 0.1.0
description:
  - For every broker, whether it is reachable and live, each mirror link and each bridge of the bridge engine
    (connected or not) with its backlog, and each application queue with its message, delivering and consumer counts and
    whether it is paused.
  - Compares each queue's durable messages between the datacentres (live brokers only).
  - A broker that does not answer is reported with C(reachable=false); a refused login fails the module.
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.management.read_only
  - continuity.artemis.management.queue_filter
options:
  tolerance:
    description: How many messages a queue's counts may differ between datacentres and still be in sync.
    type: int
    default: 0
  queues:
    description: Report the application queues (and compare them). V(false) reports brokers and links only.
    type: bool
    default: true
  must_answer:
    description:
      - Datacentres whose brokers RV(silent) names when they do not answer or have not started; a procedure waits for
        them, or refuses by name, before it changes anything.
    type: list
    elements: str
    default: []
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Read the replication state of every broker
  continuity.artemis.artemis_replication_info:
    brokers:
      - {name: lon-mq1, datacentre: london, management_url: "https://lon-mq1:8161"}
      - {name: fra-mq1, datacentre: frankfurt, management_url: "https://fra-mq1:8161"}
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    exclude_prefixes: [audit.]
  delegate_to: localhost
  run_once: true
  register: replication
'''

RETURN = r'''
brokers:
  description: One entry per broker, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Broker name., type: str, returned: always}
    datacentre: {description: Its datacentre., type: str, returned: always}
    reachable: {description: Whether its management API answered., type: bool, returned: always}
    error: {description: Why it did not answer., type: str, returned: when not reachable}
    live: {description: Started and not a waiting backup., type: bool, returned: always}
    backup: {description: The backup of its HA pair now., type: bool, returned: when reachable}
    replica_sync:
      description: A live broker has a backup that finished its initial synchronisation; a backup is in sync.
      type: bool
      returned: when reachable
    shared_store: {description: Its HA pair shares one journal (shared_store)., type: bool, returned: when reachable}
    version: {description: Artemis version., type: str, returned: when reachable}
    kept:
      description: "Messages a live broker keeps on C(continuity.kept) because the mirror found no queue for them
        (its datacentre is passive for their group), per original address. See M(continuity.artemis.artemis_reconcile)."
      type: dict
      returned: always
    unrestored:
      description: "Copies the bridge engine delivered to a live broker that its replication plugin did not send on
        to their own address, per inbound queue (C(continuity.in.<group>)); normally empty."
      type: dict
      returned: always
    links:
      description: The estate's replication from this broker, mirror broker connections and the bridge engine's
        bridges, with C(name), C(engine) (C(mirror) or C(bridge)), C(started), C(connected), C(backlog) (events in
        the mirror's store-and-forward queue, messages in the bridge's outbound queue), C(acknowledged) (what that
        queue delivered since the broker started) and C(undispatched) (of the backlog, what the link's sender has not
        taken yet; the rest is on its way or awaits the target's answer). An outbound queue whose
        bridge the broker does not list (Artemis stops every bridge of a broker once one is refused a send) is a
        link with C(listed=false), not started and not connected, and its messages as backlog.
      type: list
      elements: dict
      returned: always
    exports:
      description: The bridges to brokers outside the estate (C(replication_external_brokers)), as in RV(brokers.links).
        Not the estate's replication, so no check of this collection waits for them.
      type: list
      elements: dict
      returned: always
    queues:
      description: Application queues, with C(name), C(address), C(routing_type), C(message_count),
        C(durable_message_count), C(delivering_count), C(consumer_count), C(paused), and the counters C(messages_added) and
        C(messages_acknowledged) (since the broker started).
      type: list
      elements: dict
      returned: always
comparison:
  description: Per queue, C(durable_message_counts) by datacentre and C(in_sync). Non-durable messages are not
    compared, as a broker that crashes loses them while the other datacentres keep their copies.
  returned: always
  type: list
  elements: dict
kept_messages:
  description: Sum of every broker's kept messages.
  returned: always
  type: int
silent:
  description: "Each broker of O(must_answer) that does not answer or has not started, with why:
    C(dc2-node1 does not answer (...)), C(dc2-node2 has not started (...)). Empty when every one of them has."
  returned: always
  type: list
  elements: str
backlog:
  description: Sum of every reachable broker's link backlogs (RV(brokers.links), not the exports).
  returned: always
  type: int
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ManagementError, management_argument_spec, require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import (
    QUEUE_FILTER_ARGUMENT_SPEC, collect, compare_sites, silent_brokers)


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(
        tolerance=dict(type='int', default=0),
        queues=dict(type='bool', default=True),
        must_answer=dict(type='list', elements='str', default=[]),
    )
    argument_spec.update(QUEUE_FILTER_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1, tolerance=0)
    params = module.params
    unknown = sorted(set(params['must_answer']) - set(broker['datacentre'] for broker in params['brokers']))
    if unknown:
        module.fail_json(msg='must_answer names %s, where no broker of brokers is' % ', '.join(unknown))
    try:
        reports = collect(params['brokers'], params, params['include_prefixes'], params['exclude_prefixes'])
    except ManagementError as exc:
        module.fail_json(msg=str(exc))
    if not params['queues']:
        reports = [dict(report, queues=[]) for report in reports]
    module.exit_json(changed=False, brokers=reports, comparison=compare_sites(reports, params['tolerance']),
                     silent=silent_brokers(report for report in reports
                                           if report['datacentre'] in params['must_answer']),
                     backlog=sum(link['backlog'] for report in reports for link in report['links']),
                     kept_messages=sum(sum(report['kept'].values()) for report in reports))


if __name__ == '__main__':
    main()
