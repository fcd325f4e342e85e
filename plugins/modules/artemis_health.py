#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_health
short_description: Wait until a datacentre's brokers serve and replicate
version_added: 0.2.0
description:
  - "Polls the brokers until the datacentre is healthy: every broker of it (but O(absent)) answers and is started,
    exactly one is live (O(live) when given) and every other one is its backup, in sync with it when the pair
    replicates its journal (C(shared_nothing)); its live broker's mirror links are connected, and so are the links
    of the other datacentres' live brokers that lead to it (the estate model of O(address_groups) knows which); no such link holds
    more than O(max_backlog) events."
  - Fails after O(timeout) seconds, naming what is still wrong. Reads only.
  - The rolling restart (C(playbooks/rolling_restart.yml)) waits with it before and after each broker it restarts,
    so that an HA pair never loses its last live broker and the next broker waits until this one is back.
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.estate
  - continuity.artemis.management.read_only
options:
  datacentre:
    description: The datacentre whose brokers must be healthy. O(brokers) may list the others (for their links).
    type: str
    required: true
  live:
    description: The broker that must be the live one (after a takeover inside the pair, or after failing back).
    type: str
  absent:
    description: Brokers of the datacentre that are expected to be down (being restarted); the others must be
      healthy without them.
    type: list
    elements: str
    default: []
  active_datacentre:
    description: The datacentre that owns every group without its own C(owner) (C(replication_active_datacentre)).
    type: str
    required: true
  links:
    description: Whether mirror links count (connected, and within O(max_backlog)).
    type: bool
    default: true
  pending:
    description:
      - Brokers still waiting for a restart (they run their previous settings). The links between two datacentres
        do not count while one of them has such a broker (a peer on new settings, a new CA for example, may not
        accept them yet); they count once both have restarted.
    type: list
    elements: str
    default: []
  max_backlog:
    description: The most events a checked link may hold in its store-and-forward queue (caught up). No limit when
      unset.
    type: int
  timeout:
    description: Seconds to wait; V(0) looks once.
    type: int
    default: 300
  poll_interval:
    description: Seconds between two looks.
    type: float
    default: 0.5
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Wait until frankfurt's backup has taken over from fra-mq1
  continuity.artemis.artemis_health:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    ca_path: /etc/continuity/pki/ca.pem
    datacentre: frankfurt
    live: fra-mq2
    absent: [fra-mq1]
    links: false
    timeout: 60
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
healthy:
  description: Whether the datacentre was healthy at the last look (always true when the module succeeds).
  returned: always
  type: bool
live:
  description: The datacentre's live broker at the last look (none when there is not exactly one).
  returned: always
  type: str
waited:
  description: Seconds until the datacentre was healthy (or the timeout).
  returned: always
  type: float
problems:
  description: What was still wrong at the last look.
  returned: always
  type: list
  elements: str
brokers:
  description: The datacentre's brokers at the last look, with C(reachable), C(started), C(live), C(backup),
    C(replica_sync) and C(version).
  returned: always
  type: list
  elements: dict
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    EstateError, estate_argument_spec, link_targets)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ManagementError, management_argument_spec, require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import (
    assess_datacentre, collect)

_SHOWN = ('name', 'reachable', 'started', 'live', 'backup', 'replica_sync', 'version')


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(
        datacentre=dict(type='str', required=True),
        live=dict(type='str'),
        absent=dict(type='list', elements='str', default=[]),
        active_datacentre=dict(type='str', required=True),
        links=dict(type='bool', default=True),
        pending=dict(type='list', elements='str', default=[]),
        max_backlog=dict(type='int'),
        timeout=dict(type='int', default=300),
        poll_interval=dict(type='float', default=0.5),
    )
    argument_spec.update(estate_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    require_at_least(module, request_timeout=1, timeout=0, poll_interval=0.1, max_backlog=0)
    params = module.params
    mine = [broker for broker in params['brokers'] if broker['datacentre'] == params['datacentre']]
    if not mine:
        module.fail_json(msg='datacentre %r has no broker in brokers (datacentres: %s)' % (
            params['datacentre'], ', '.join(sorted(set(b['datacentre'] for b in params['brokers'])))))
    unknown = sorted(set(params['absent'] + ([params['live']] if params['live'] else []))
                     - set(broker['name'] for broker in mine))
    if unknown:
        module.fail_json(msg='live and absent must name brokers of %s; not of it: %s'
                         % (params['datacentre'], ', '.join(unknown)))
    targets = None
    if params['links']:
        datacentres = sorted(set(broker['datacentre'] for broker in params['brokers']))
        if params['active_datacentre'] not in datacentres:
            # The model would give no links at all: the other datacentres' links would silently not count.
            module.fail_json(msg='active_datacentre %r has no broker in brokers (datacentres: %s)'
                             % (params['active_datacentre'], ', '.join(datacentres)))
        try:
            targets = link_targets(params['address_groups'], datacentres, params['active_datacentre'])
        except EstateError as exc:
            module.fail_json(msg='address_groups: %s' % exc)
    settling = sorted(set(broker['datacentre'] for broker in params['brokers'] if broker['name'] in params['pending']))
    # Only the brokers whose answers matter: this datacentre's, and the others' when their links are checked.
    looked_at = params['brokers'] if targets else mine

    started = time.monotonic()
    while True:
        try:
            reports = collect(looked_at, params)
        except ManagementError as exc:
            module.fail_json(msg=str(exc))
        if not params['links']:
            reports = [dict(report, links=[]) for report in reports]
        problems = assess_datacentre(reports, params['datacentre'], params['live'], params['absent'],
                                     targets if params['links'] else None, params['max_backlog'], settling)
        waited = round(time.monotonic() - started, 3)
        if not problems or waited >= params['timeout']:
            break
        time.sleep(params['poll_interval'])

    live = [report['name'] for report in reports
            if report['datacentre'] == params['datacentre'] and report.get('live')]
    result = dict(changed=False, healthy=not problems, live=live[0] if len(live) == 1 else None, waited=waited,
                  problems=problems,
                  brokers=[dict((key, report.get(key)) for key in _SHOWN) for report in reports
                           if report['datacentre'] == params['datacentre']])
    if problems:
        module.fail_json(msg='%s is not healthy after %ss: %s'
                         % (params['datacentre'], params['timeout'], '; '.join(problems)), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
