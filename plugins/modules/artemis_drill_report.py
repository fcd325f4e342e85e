#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_drill_report
short_description: Write a DR drill's evidence report from its ledger and the operations' events
version_added: 0.5.0
description:
  - Reads the ledger of M(continuity.artemis.artemis_drill_load), marks the fault (the fence of the first
    operation's source) and writes, under O(report_dir)/<drill>/, C(evidence.json), C(report.html) and
    C(ledger.jsonl) (the ledger with its fault row, in the format the RPO job reads from its C(ledgers/)
    directory).
  - The figures are the RPO job's definitions (module_utils/drill.py) - C(lost), accepted and never consumed;
    C(duplicates), deliveries beyond the first; C(rpo_seconds), 0 without loss; C(rto_seconds), the fence to the
    first message accepted or consumed at the target - held against O(objectives). C(sla_passed) is true only
    when nothing was lost or duplicated, both objectives were met and O(failures) is empty.
options:
  drill:
    description: The drill's id.
    type: str
    required: true
  ledger:
    description: The load's ledger (JSON lines).
    type: path
    required: true
  events:
    description: The events the drill's operations recorded (C(continuity_events)), in order.
    type: list
    elements: dict
    required: true
  source:
    description: The datacentre active when the drill started.
    type: str
    required: true
  target:
    description: The datacentre the drill swapped over to.
    type: str
    required: true
  round_trip:
    description: Whether the drill swapped back to O(source).
    type: bool
    default: true
  address:
    description: The drill address.
    type: str
    required: true
  rate:
    description: The load's rate (messages per second).
    type: float
    required: true
  objectives:
    description: C(rpo_seconds) and C(rto_seconds) the drill is held to.
    type: dict
    required: true
  estate:
    description: What the evidence records of the estate (datacentres, groups, brokers).
    type: dict
    default: {}
  load:
    description: The load's own counts (the result of M(continuity.artemis.artemis_drill_load)).
    type: dict
    default: {}
  failures:
    description: What went wrong in the drill's procedure (an aborted swapover); any fails the drill.
    type: list
    elements: str
    default: []
  started:
    description: When the drill started (ISO 8601, UTC).
    type: str
    required: true
  report_dir:
    description: The directory the drill's report directory is created in.
    type: path
    required: true
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Write the evidence
  continuity.artemis.artemis_drill_report:
    drill: "{{ drill_id }}"
    ledger: /var/tmp/drill/load.jsonl
    events: "{{ continuity_events }}"
    source: dc1
    target: dc2
    address: drill.continuity
    rate: 100
    objectives: {rpo_seconds: 5, rto_seconds: 120}
    started: "2026-11-26T01:00:00Z"
    report_dir: /var/lib/continuity-artemis/drills
'''

RETURN = r'''
evidence:
  description: The content of C(evidence.json).
  returned: success
  type: dict
directory:
  description: Where the report was written.
  returned: success
  type: str
'''

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils import drill as drill_evidence


def _epoch(iso):
    return datetime.datetime.fromisoformat(iso.replace('Z', '+00:00')).timestamp()


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace('+00:00', 'Z')


def evidence_of(params, rows):
    """The evidence document of the drill: the ledger's outcome, the phases and the verdict."""
    fences = [event for event in params['events'] if event.get('phase') == 'fenced'
              and event.get('source') == params['source']]
    if fences:
        rows = [drill_evidence.fault_row(params['drill'], params['source'], _epoch(fences[0]['at']))] + rows
    result = drill_evidence.outcome(rows)
    start = _epoch(params['started'])
    phases = [{'operation': '%s %s to %s' % (event.get('name'), event.get('source'), event.get('target')),
               'phase': event.get('phase'), 'at': event.get('at'),
               'seconds_since_start': round(_epoch(event['at']) - start, 3), 'details': event.get('details', {})}
              for event in params['events']]
    objectives = params['objectives']
    failures = list(params['failures'])
    if not fences:
        failures.append('no fence of %s was recorded: the swapover did not start' % params['source'])
    for figure in ('lost', 'duplicates'):
        if result[figure]:
            failures.append('%d messages %s' % (result[figure], 'lost' if figure == 'lost' else 'duplicated'))
    for figure in ('rpo_seconds', 'rto_seconds'):
        value, objective = result[figure], float(objectives[figure])
        if value is None or value > objective:
            failures.append('%s %s above the objective %s' % (figure, 'unknown' if value is None else
                                                              '%.3f' % value, objective))
    evidence = dict(result, drill=params['drill'], source=params['source'], target=params['target'],
                    round_trip=params['round_trip'], address=params['address'], rate=params['rate'],
                    objectives={key: float(objectives[key]) for key in ('rpo_seconds', 'rto_seconds')},
                    phases=phases, load=params['load'], estate=params['estate'], failures=failures,
                    sla_passed=not failures, started=params['started'], finished=_now())
    return evidence, rows


def main():
    module = AnsibleModule(
        argument_spec={
            'drill': {'type': 'str', 'required': True},
            'ledger': {'type': 'path', 'required': True},
            'events': {'type': 'list', 'elements': 'dict', 'required': True},
            'source': {'type': 'str', 'required': True},
            'target': {'type': 'str', 'required': True},
            'round_trip': {'type': 'bool', 'default': True},
            'address': {'type': 'str', 'required': True},
            'rate': {'type': 'float', 'required': True},
            'objectives': {'type': 'dict', 'required': True},
            'estate': {'type': 'dict', 'default': {}},
            'load': {'type': 'dict', 'default': {}},
            'failures': {'type': 'list', 'elements': 'str', 'default': []},
            'started': {'type': 'str', 'required': True},
            'report_dir': {'type': 'path', 'required': True},
        },
        supports_check_mode=False,
    )
    params = module.params
    missing = [key for key in ('rpo_seconds', 'rto_seconds') if key not in params['objectives']]
    if missing:
        module.fail_json(msg='objectives needs %s' % ', '.join(missing))
    try:
        rows = drill_evidence.read_ledger(params['ledger'])
    except (OSError, ValueError) as exc:
        module.fail_json(msg='cannot read the drill ledger %s: %s' % (params['ledger'], exc))
    evidence, rows = evidence_of(params, rows)
    directory = os.path.join(params['report_dir'], params['drill'])
    os.makedirs(directory, mode=0o750, exist_ok=True)
    drill_evidence.write_ledger(os.path.join(directory, 'ledger.jsonl'), rows)
    with open(os.path.join(directory, 'evidence.json'), 'w', encoding='utf-8') as handle:
        json.dump(evidence, handle, indent=2, sort_keys=True)
    points = drill_evidence.timeline(rows, _epoch(params['started']))
    with open(os.path.join(directory, 'report.html'), 'w', encoding='utf-8') as handle:
        handle.write(drill_evidence.report_html(evidence, points))
    for name in ('ledger.jsonl', 'evidence.json', 'report.html'):
        os.chmod(os.path.join(directory, name), 0o640)
    module.exit_json(changed=True, evidence=evidence, directory=directory)


if __name__ == '__main__':
    main()
