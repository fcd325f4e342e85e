# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A DR drill's ledger and the evidence drawn from it.

The ledger has the RPO job's format (spark/continuity_rpo/telemetry.py, kind ``ledgers``): one row per message
accepted by a broker and per delivery consumed, each with its datacentre, and one ``fault`` row: when the active
datacentre stopped serving (a swapover's fence, a failover's power-off). ``outcome`` reads it exactly as the job's
``drill_outcomes`` does (tests/unit/spark/test_drill_evidence.py holds the two to the same answer), so the drill's
own report and the figures the job publishes from the same ledger agree.
"""

from __future__ import annotations

import html
import json
import math

FAULT = 'fault'
ACCEPTED = 'accepted'
CONSUMED = 'consumed'
PRESENT = 'present'


def ledger_rows(drill, producer_records, producer_datacentres, consumers):
    """Rows of the messages a producer had accepted and of every delivery its consumers accepted.

    ``producer_records``: the producer's ledger (``id``, ``outcome``, ``settled_at``, ``connection``);
    ``producer_datacentres``: the datacentre of each of its URLs (it connects to them in turn);
    ``consumers``: (consumer ledger, datacentres of its URLs) pairs."""
    rows = []
    for record in producer_records:
        if record.outcome == ACCEPTED:
            rows.append({'drill': drill, 'id': record.id, 'event': ACCEPTED, 'time': record.settled_at,
                         'datacentre': producer_datacentres[(record.connection - 1) % len(producer_datacentres)]})
    for records, datacentres in consumers:
        for record in records:
            if record.accepted_at is not None:
                rows.append({'drill': drill, 'id': record.id, 'event': CONSUMED, 'time': record.accepted_at,
                             'datacentre': datacentres[(record.connection - 1) % len(datacentres)]})
    return rows


def fault_row(drill, datacentre, time):
    return {'drill': drill, 'id': None, 'datacentre': datacentre, 'event': FAULT, 'time': time}


def read_ledger(path):
    with open(path, encoding='utf-8') as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_ledger(path, rows):
    with open(path, 'w', encoding='utf-8') as handle:
        handle.writelines(json.dumps(row, sort_keys=True) + '\n' for row in rows)


def outcome(rows):
    """What the drill's ledger says: ``accepted``, ``lost`` (accepted, then neither consumed nor left anywhere),
    ``duplicates`` (deliveries beyond the first), ``rpo_seconds`` (0 without loss, else the fault minus the oldest
    lost message's acceptance), ``rto_seconds`` (the fault to the first message accepted or consumed at another
    datacentre; None when nothing was), ``fault_time`` and ``failed_datacentre``."""
    faults = [row for row in rows if row['event'] == FAULT]
    fault_time = min((row['time'] for row in faults), default=None)
    failed = faults[0]['datacentre'] if faults else None
    accepted_at, deliveries = {}, {}
    for row in rows:
        if row['event'] == ACCEPTED:
            accepted_at[row['id']] = min(row['time'], accepted_at.get(row['id'], row['time']))
        elif row['event'] in (CONSUMED, PRESENT):
            deliveries[row['id']] = deliveries.get(row['id'], 0) + 1
    lost = [message for message in accepted_at if not deliveries.get(message)]
    duplicates = sum(max(count - 1, 0) for count in deliveries.values())
    recovered = [row['time'] for row in rows if row['event'] in (ACCEPTED, CONSUMED) and fault_time is not None
                 and row['time'] > fault_time and row['datacentre'] != failed]
    rpo = 0.0 if not lost else (fault_time - min(accepted_at[message] for message in lost)
                                if fault_time is not None else None)
    return {'accepted': len(accepted_at), 'lost': len(lost), 'duplicates': duplicates, 'rpo_seconds': rpo,
            'rto_seconds': (min(recovered) - fault_time) if recovered else None,
            'fault_time': fault_time, 'failed_datacentre': failed}


def timeline(rows, start, step=1.0):
    """Per ``step`` seconds from ``start``: messages accepted and consumed (first deliveries), the backlog (accepted
    and not yet consumed) at the step's end, and the end-to-end latency (acceptance to consumption) of the messages
    consumed in it, median and largest."""
    accepted_at = {}
    firsts = {}
    for row in rows:
        if row['event'] == ACCEPTED:
            accepted_at[row['id']] = row['time']
        elif row['event'] == CONSUMED and (row['id'] not in firsts or row['time'] < firsts[row['id']]):
            firsts[row['id']] = row['time']
    end = max([start] + list(accepted_at.values()) + list(firsts.values()))
    steps = int(math.floor((end - start) / step)) + 1
    points = [{'at': round(index * step, 3), 'accepted': 0, 'consumed': 0, 'backlog': 0, 'latencies': []}
              for index in range(steps)]

    def index_of(time):
        return min(max(int((time - start) // step), 0), steps - 1)

    for time in accepted_at.values():
        points[index_of(time)]['accepted'] += 1
    for message, time in firsts.items():
        point = points[index_of(time)]
        point['consumed'] += 1
        if message in accepted_at:
            point['latencies'].append(time - accepted_at[message])
    backlog = 0
    for point in points:
        backlog += point['accepted'] - point['consumed']
        point['backlog'] = backlog
        latencies = sorted(point.pop('latencies'))
        point['latency_p50_seconds'] = latencies[len(latencies) // 2] if latencies else None
        point['latency_max_seconds'] = latencies[-1] if latencies else None
    return points


def _svg_plot(title, points, series, unit):
    """A line chart as inline SVG: ``series`` is [(key, label, colour)] of ``points``."""
    width, height, margin = 720, 220, 48
    values = [point[key] for point in points for key, _label, _colour in series if point[key] is not None]
    top = max(values + [1e-9])
    span = max(points[-1]['at'], 1e-9) if points else 1.0

    def x(at):
        return margin + (width - 2 * margin) * at / span

    def y(value):
        return height - margin + (2 * margin - height) * value / top

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">'
             % (width, height, html.escape(title)),
             '<text x="%d" y="16" font-weight="bold">%s</text>' % (margin, html.escape(title)),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>'
             % (margin, height - margin, width - margin, height - margin),
             '<text x="4" y="%d">%s</text>' % (margin, html.escape('%.3g %s' % (top, unit))),
             '<text x="%d" y="%d">%s</text>' % (width - margin - 60, height - margin + 16,
                                                html.escape('%.0f s' % span))]
    for number, (key, label, colour) in enumerate(series):
        line = ' '.join('%.1f,%.1f' % (x(point['at']), y(point[key])) for point in points
                        if point[key] is not None)
        parts.append('<polyline fill="none" stroke="%s" points="%s"/>' % (colour, line))
        parts.append('<text x="%d" y="%d" fill="%s">%s</text>' % (margin + 160 * number, height - 8, colour,
                                                                  html.escape(label)))
    parts.append('</svg>')
    return '\n'.join(parts)


def _cell(value):
    if value is None:
        return 'n/a'
    if isinstance(value, float):
        return '%.3f' % value
    return html.escape(str(value))


def report_html(evidence, points):
    """The drill's evidence as one self-contained HTML page."""
    verdict = 'PASSED' if evidence['sla_passed'] else 'FAILED'
    figures = [('Messages accepted', evidence['accepted'], ''), ('Lost (ledger)', evidence['lost'], '0'),
               ('Duplicates (ledger)', evidence['duplicates'], '0'),
               ('RPO achieved (s)', evidence['rpo_seconds'], evidence['objectives']['rpo_seconds']),
               ('RTO achieved (s), fence to first message served by %s' % evidence['target'],
                evidence['rto_seconds'], evidence['objectives']['rto_seconds'])]
    rows = ''.join('<tr><td>%s</td><td>%s</td><td>%s</td></tr>' % (html.escape(name), _cell(value), _cell(objective))
                   for name, value, objective in figures)
    phases = ''.join('<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                     % (_cell(phase['operation']), _cell(phase['phase']), _cell(phase['at']),
                        _cell(phase['seconds_since_start'])) for phase in evidence['phases'])
    failures = ''.join('<li>%s</li>' % html.escape(reason) for reason in evidence['failures'])
    return '\n'.join([
        '<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
        '<title>DR drill %s: %s</title>' % (html.escape(evidence['drill']), verdict),
        '<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}'
        'table{border-collapse:collapse;margin-bottom:1em}.PASSED{color:#060}.FAILED{color:#a00}</style>',
        '</head><body>',
        '<h1>DR drill %s: <span class="%s">%s</span></h1>' % (html.escape(evidence['drill']), verdict, verdict),
        '<p>%s to %s%s, drill address %s at %s msg/s; started %s, finished %s.</p>'
        % (html.escape(evidence['source']), html.escape(evidence['target']),
           ' and back' if evidence['round_trip'] else '', html.escape(evidence['address']),
           _cell(evidence['rate']), html.escape(evidence['started']), html.escape(evidence['finished'])),
        '<ul>%s</ul>' % failures if failures else '',
        '<h2>Against the objectives</h2>',
        '<table><tr><th>figure</th><th>achieved</th><th>objective</th></tr>%s</table>' % rows,
        '<h2>Phases</h2>',
        '<table><tr><th>operation</th><th>phase</th><th>at (UTC)</th><th>s since start</th></tr>%s</table>'
        % phases,
        '<h2>Load, backlog and lag</h2>',
        _svg_plot('Messages per second', points, [('accepted', 'accepted', '#1f77b4'),
                                                  ('consumed', 'consumed', '#ff7f0e')], 'msg/s'),
        _svg_plot('Backlog (accepted, not yet consumed)', points, [('backlog', 'backlog', '#2ca02c')], 'msg'),
        _svg_plot('Lag, the producer told its message is stored to its consumption (the consumer may be first)',
                  points,
                  [('latency_p50_seconds', 'median', '#9467bd'), ('latency_max_seconds', 'largest', '#d62728')],
                  's'),
        '<h2>Estate</h2><pre>%s</pre>' % html.escape(json.dumps(evidence['estate'], indent=2, sort_keys=True)),
        '</body></html>', ''])
