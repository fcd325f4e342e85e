#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_drain_check
short_description: Wait until a datacentre has replicated everything to the others
version_added: 0.1.0
description:
  - Polls the brokers until the source datacentre's mirror links and bridges have an empty backlog (not the exports
    to brokers outside the estate, which carry on from the source) and every application queue holds the same number
    of messages in every datacentre (within O(tolerance)). A bridge's outbound queue counts whether the broker lists
    the bridge or not.
  - Fails after O(timeout) seconds with the backlog per link and the counts of every queue that differs.
  - Reads only. Run it after the source site's clients are fenced, or the counts keep moving.
  - "A queue short at a passive datacentre because the mirror delivered its messages before its creation is out of
    sync here; those messages are kept there (C(kept)) and M(continuity.artemis.artemis_reconcile) settles them."
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.management.read_only
  - continuity.artemis.management.queue_filter
options:
  source_datacentre:
    description: The datacentre whose replication must be drained.
    type: str
    required: true
  tolerance:
    description: How many messages a queue's counts may differ between datacentres.
    type: int
    default: 0
  timeout:
    description: Seconds to wait for the drain.
    type: int
    default: 300
  compare_queues:
    description: Compare the queues' durable messages too (non-durable ones do not survive a crash of their broker,
      while the other datacentres keep their copies). V(false) waits only for the source's mirror backlog to be
      delivered.
    type: bool
    default: true
  links:
    description:
      - Only these mirror connections and bridges (by name, as the brokers list them) are waited for; empty, every
        one. A swapover waits for its groups' links only, as the other groups' clients go on acting.
    type: list
    elements: str
    default: []
  caught_up:
    description:
      - "For a source whose clients go on acting (a failback's active datacentre), where neither the counts nor the
        backlog ever settle: done when every event that each source link held at its first look has been delivered
        (the link's queue has acknowledged that many more), whatever arrived since. Queue counts are not compared."
      - A link whose broker restarted (its counters start again) is looked at afresh.
    type: bool
    default: false
  poll_interval:
    description: Seconds between two looks.
    type: float
    default: 1.0
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Wait until london has replicated everything to frankfurt
  continuity.artemis.artemis_drain_check:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    source_datacentre: london
    exclude_prefixes: [audit.]
    timeout: 600
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
drained:
  description: Whether the drain completed (always true when the module succeeds).
  returned: always
  type: bool
elapsed:
  description: Seconds it took.
  returned: always
  type: float
backlog:
  description: Events left in the source's store-and-forward queues at the end, per link.
  returned: always
  type: dict
out_of_sync:
  description: Queues whose counts still differ at the end (see artemis_replication_info's C(comparison)).
  returned: always
  type: list
  elements: dict
kept:
  description: Messages the other datacentres keep because the mirror found no queue for them, per broker.
  returned: always
  type: dict
progress:
  description: One sample per poll, C(elapsed), C(backlog) (total), C(out_of_sync) (number of queues) and
    C(unreachable) (the brokers that did not answer or were not started, and a source without a live broker).
  returned: always
  type: list
  elements: dict
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ManagementError, management_argument_spec, require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import (
    QUEUE_FILTER_ARGUMENT_SPEC, collect, compare_sites, has_started)


def look(params):
    """(backlog per source link, acknowledged per source link, queues out of sync, brokers unreachable or not started,
    kept messages per broker)."""
    reports = collect(params['brokers'], params, params['include_prefixes'], params['exclude_prefixes'])
    source = [report for report in reports if report['datacentre'] == params['source_datacentre']]
    links = [(report, link) for report in source for link in report['links']
             if not params['links'] or link['name'] in params['links']]
    backlog = dict(('%s/%s' % (report['name'], link['name']), link['backlog']) for report, link in links)
    acknowledged = dict(('%s/%s' % (report['name'], link['name']), link.get('acknowledged', 0))
                        for report, link in links)
    out_of_sync = []
    if params['compare_queues'] and not params['caught_up']:
        out_of_sync = [entry for entry in compare_sites(reports, params['tolerance']) if not entry['in_sync']]
    # A source of brokers that have not started alone would look drained.
    unreachable = [report['name'] for report in reports if not has_started(report)]
    if not any(report.get('live') for report in source):
        # Every broker answers as a backup (a pair between takeover and failback): nothing at the source is read.
        unreachable.append('no live broker at %s' % params['source_datacentre'])
    kept = dict((report['name'], sum(report['kept'].values())) for report in reports if report['kept'])
    return backlog, acknowledged, out_of_sync, unreachable, kept


def still_to_deliver(backlog, acknowledged, marks):
    """Per source link, how many of the events it held at its mark it has not delivered yet (links done left out).
    ``marks`` ({link: {'acknowledged', 'until'}}) is updated: a link seen for the first time, or whose acknowledged
    count went back (its broker restarted or its backup took over), is marked at what it has delivered plus what it
    holds now."""
    waiting = {}
    for link, held in backlog.items():
        delivered = acknowledged.get(link, 0)
        mark = marks.get(link)
        if mark is None or delivered < mark['acknowledged']:
            mark = marks[link] = {'acknowledged': delivered, 'until': delivered + held}
        mark['acknowledged'] = delivered
        if delivered < mark['until']:
            waiting[link] = mark['until'] - delivered
    return waiting


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(
        source_datacentre=dict(type='str', required=True),
        tolerance=dict(type='int', default=0),
        timeout=dict(type='int', default=300),
        poll_interval=dict(type='float', default=1.0),
        compare_queues=dict(type='bool', default=True),
        caught_up=dict(type='bool', default=False),
        links=dict(type='list', elements='str', default=[]),
    )
    argument_spec.update(QUEUE_FILTER_ARGUMENT_SPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1, timeout=1, poll_interval=0.1, tolerance=0)
    params = module.params
    datacentres = sorted(set(broker['datacentre'] for broker in params['brokers']))
    if params['source_datacentre'] not in datacentres:
        module.fail_json(msg='source_datacentre %r is not the datacentre of any of the brokers (%s)'
                         % (params['source_datacentre'], ', '.join(datacentres)))
    if len(datacentres) < 2:
        module.fail_json(msg='brokers must include the other datacentres to compare with (got only %s)'
                         % ', '.join(datacentres))

    started = time.monotonic()
    progress, marks = [], {}
    while True:
        try:
            backlog, acknowledged, out_of_sync, unreachable, kept = look(params)
        except ManagementError as exc:
            module.fail_json(msg=str(exc), progress=progress)
        elapsed = round(time.monotonic() - started, 3)
        progress.append({'elapsed': elapsed, 'backlog': sum(backlog.values()), 'out_of_sync': len(out_of_sync),
                         'unreachable': unreachable})
        if params['caught_up']:
            waiting = still_to_deliver(backlog, acknowledged, marks)
            drained = not unreachable and not waiting
        else:
            waiting = backlog
            drained = not unreachable and not out_of_sync and not any(backlog.values())
        if drained or elapsed >= params['timeout']:
            break
        time.sleep(params['poll_interval'])

    result = dict(changed=False, drained=drained, elapsed=elapsed, backlog=backlog, out_of_sync=out_of_sync,
                  kept=kept, progress=progress)
    if not drained:
        module.fail_json(msg='%s did not drain within %ss: %s per link %s; queues out of sync: %s%s%s' % (
            params['source_datacentre'], params['timeout'],
            'still to deliver of what it held at first' if params['caught_up'] else 'backlog', waiting,
            ', '.join('%s %s' % (entry['queue'], entry['durable_message_counts']) for entry in out_of_sync) or 'none',
            '; unreachable or not started: %s' % ', '.join(unreachable) if unreachable else '',
            '; kept because the mirror found no queue (settle them with artemis_reconcile): %s' % kept
            if kept else ''), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
