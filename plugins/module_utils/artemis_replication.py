# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the replication looks like from the brokers: links, their backlog, queues, and site-by-site comparison.

Shared by artemis_replication_info, artemis_drain_check and artemis_site.
"""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    MIRROR_QUEUE_PREFIX, ArtemisManagement, ManagementError)

# Options selecting which queues count as replicated application queues.
QUEUE_FILTER_ARGUMENT_SPEC = dict(
    include_prefixes=dict(type='list', elements='str', default=[]),
    exclude_prefixes=dict(type='list', elements='str', default=[]),
)


def _int(value):
    return int(value) if value not in (None, '') else 0


def _flag(value):
    return value in (True, 'true')


def is_application_queue(queue, include_prefixes=(), exclude_prefixes=()):
    """Queues clients use: not internal (mirror store-and-forward, management) nor temporary, and selected by the
    prefixes (every queue when ``include_prefixes`` is empty)."""
    name = queue['name']
    if _flag(queue.get('internalQueue')) or _flag(queue.get('temporary')) or name.startswith('$ACTIVEMQ_ARTEMIS'):
        return False
    if include_prefixes and not any(name.startswith(prefix) for prefix in include_prefixes):
        return False
    return not any(name.startswith(prefix) for prefix in exclude_prefixes)


def broker_report(client, include_prefixes=(), exclude_prefixes=()):
    """One broker's state. Raises ManagementError when it cannot be read."""
    status = client.status()
    report = dict(status, reachable=True, links=[], queues=[])
    if not status['live']:
        return report  # a backup holds no queues of its own until it takes over
    queues = client.queues()
    backlog = dict((queue['name'], _int(queue['messageCount'])) for queue in queues
                   if queue['name'].startswith(MIRROR_QUEUE_PREFIX))
    for connection in client.broker_connections():
        report['links'].append({
            'name': connection['name'],
            'started': _flag(connection.get('started')),
            'connected': _flag(connection.get('connected')),
            'backlog': backlog.get(MIRROR_QUEUE_PREFIX + connection['name'], 0),
        })
    for queue in queues:
        if is_application_queue(queue, include_prefixes, exclude_prefixes):
            report['queues'].append({
                'name': queue['name'],
                'address': queue['address'],
                'routing_type': queue['routingType'].lower(),
                'message_count': _int(queue['messageCount']),
                'delivering_count': _int(queue['deliveringCount']),
                'consumer_count': _int(queue['consumerCount']),
                'paused': _flag(queue['paused']),
                'messages_added': _int(queue.get('messagesAdded')),
                'messages_acknowledged': _int(queue.get('messagesAcked')),
            })
    return report


def collect(brokers, params, include_prefixes=(), exclude_prefixes=()):
    """Reports for every broker; an unreachable one is reported (``reachable: false`` and ``error``), a refused
    login or any other error is raised."""
    reports = []
    for broker in brokers:
        entry = {'name': broker['name'], 'datacentre': broker['datacentre']}
        try:
            entry.update(broker_report(ArtemisManagement.from_params(broker, params),
                                       include_prefixes, exclude_prefixes))
        except ManagementError as exc:
            if 'unreachable' not in str(exc) and 'no answer within' not in str(exc):
                raise
            entry.update(reachable=False, error=str(exc), live=False, links=[], queues=[])
        reports.append(entry)
    return reports


def compare_sites(reports, tolerance=0):
    """Per queue, the message count on the live broker(s) of each datacentre, and whether they agree within
    ``tolerance``. A queue missing in a reachable datacentre counts as 0 there."""
    counts = {}
    datacentres = sorted(set(report['datacentre'] for report in reports if report.get('live')))
    for report in reports:
        for queue in report.get('queues', []):
            per_dc = counts.setdefault(queue['name'], dict((dc, 0) for dc in datacentres))
            per_dc[report['datacentre']] += queue['message_count']
    comparison = []
    for name in sorted(counts):
        values = counts[name].values()
        comparison.append({'queue': name, 'message_counts': counts[name],
                           'in_sync': max(values) - min(values) <= tolerance})
    return comparison
