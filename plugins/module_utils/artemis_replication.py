# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the replication looks like from the brokers: links, their backlog, queues, and site-by-site comparison.

Shared by artemis_replication_info, artemis_drain_check and artemis_site.
"""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import (
    KEPT_ADDRESS, ORIGINAL_ADDRESS_PROPERTY)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ACTIVATION_ADDRESS, EXPORT_QUEUE_PREFIX, INBOUND_ADDRESS_PREFIX, MIRROR_QUEUE_PREFIX, OUTBOUND_QUEUE_PREFIX)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, BrokerNotReady, BrokerUnreachable, ask_each)

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
    """Queues clients use: not internal (mirror store-and-forward, the bridge engine's outbound and inbound queues,
    management, what a passive site keeps, the activation records and holds each broker keeps for itself) nor
    temporary, and selected by the prefixes (every queue when ``include_prefixes`` is empty)."""
    name = queue['name']
    if _flag(queue.get('internalQueue')) or _flag(queue.get('temporary')) or name.startswith('$ACTIVEMQ_ARTEMIS') \
            or name.startswith((OUTBOUND_QUEUE_PREFIX, INBOUND_ADDRESS_PREFIX, EXPORT_QUEUE_PREFIX)) \
            or name in (KEPT_ADDRESS, ACTIVATION_ADDRESS):
        return False
    if include_prefixes and not any(name.startswith(prefix) for prefix in include_prefixes):
        return False
    return not any(name.startswith(prefix) for prefix in exclude_prefixes)


def _nothing_read():
    """What a report holds before anything of the broker is read (and stays so when it cannot be)."""
    return dict(links=[], exports=[], queues=[], kept={}, unrestored={})


def broker_report(client, include_prefixes=(), exclude_prefixes=()):
    """One broker's state. Raises ManagementError when it cannot be read."""
    status = client.status()
    report = dict(status, reachable=True, **_nothing_read())
    if not status['live']:
        return report  # a backup holds no queues of its own until it takes over
    queues = client.queues()
    if any(queue['name'] == KEPT_ADDRESS and _int(queue['messageCount']) for queue in queues):
        report['kept'] = client.count_messages(KEPT_ADDRESS, KEPT_ADDRESS, group_by=ORIGINAL_ADDRESS_PROPERTY)
    backlog = dict((queue['name'], _int(queue['messageCount'])) for queue in queues
                   if queue['name'].startswith(MIRROR_QUEUE_PREFIX))
    # How many events a link's queue has delivered since the broker started: with the backlog, where a drain under
    # load stands (artemis_drain_check's caught_up).
    acknowledged = dict((queue['name'], _int(queue.get('messagesAcked'))) for queue in queues)
    # Of the backlog, the events its sender has not taken yet (the rest are on their way or await the target's
    # answer): what a power loss of this broker would lose of it, as what is on the wire still arrives.
    undispatched = dict((queue['name'], max(_int(queue['messageCount']) - _int(queue.get('deliveringCount')), 0))
                        for queue in queues)
    for connection in client.broker_connections():
        report['links'].append({
            'name': connection['name'],
            'engine': 'mirror',
            'started': _flag(connection.get('started')),
            'connected': _flag(connection.get('connected')),
            'backlog': backlog.get(MIRROR_QUEUE_PREFIX + connection['name'], 0),
            'acknowledged': acknowledged.get(MIRROR_QUEUE_PREFIX + connection['name'], 0),
            'undispatched': undispatched.get(MIRROR_QUEUE_PREFIX + connection['name'], 0),
        })
    outbound = dict((queue['name'], _int(queue['messageCount'])) for queue in queues
                    if queue['name'].startswith((OUTBOUND_QUEUE_PREFIX, EXPORT_QUEUE_PREFIX)))
    # Bridged copies that the replication plugin did not send on to their own address wait here.
    report['unrestored'] = dict((queue['name'], _int(queue['messageCount'])) for queue in queues
                                if queue['name'].startswith(INBOUND_ADDRESS_PREFIX) and _int(queue['messageCount']))
    bridged = set()
    for bridge in client.bridges():
        if bridge['queue'] in outbound:
            bridged.add(bridge['queue'])
            # The outbound queue counts what the bridge has not forwarded yet and what the remote has not confirmed.
            # An export leads to a broker outside the estate: reported apart, as it is not the estate's replication.
            kind = 'exports' if bridge['queue'].startswith(EXPORT_QUEUE_PREFIX) else 'links'
            report[kind].append({'name': bridge['name'], 'engine': 'bridge', 'started': True,
                                 'connected': bridge['connected'], 'backlog': outbound[bridge['queue']],
                                 'acknowledged': acknowledged[bridge['queue']],
                                 'undispatched': undispatched[bridge['queue']]})
    # Artemis stops every bridge of a broker once one is refused a send (AMQ224058), and no longer lists them: what
    # waits in their outbound queues has not crossed all the same (the drain check and the collector count it).
    for name in sorted(set(outbound) - bridged):
        if name.startswith(OUTBOUND_QUEUE_PREFIX):
            report['links'].append({'name': name, 'engine': 'bridge', 'listed': False, 'started': False,
                                    'connected': False, 'backlog': outbound[name], 'acknowledged': acknowledged[name],
                                    'undispatched': undispatched[name]})
    durable = None
    for queue in queues:
        if is_application_queue(queue, include_prefixes, exclude_prefixes):
            if durable is None:
                durable = client.durable_message_counts()
            report['queues'].append({
                'name': queue['name'],
                'address': queue['address'],
                'routing_type': queue['routingType'].lower(),
                'message_count': _int(queue['messageCount']),
                'durable_message_count': durable.get(queue['name'], 0),
                'delivering_count': _int(queue['deliveringCount']),
                'consumer_count': _int(queue['consumerCount']),
                'paused': _flag(queue['paused']),
                'messages_added': _int(queue.get('messagesAdded')),
                'messages_acknowledged': _int(queue.get('messagesAcked')),
            })
    return report


def collect(brokers, params, include_prefixes=(), exclude_prefixes=()):
    """Reports for every broker, all asked at once (a datacentre that is dark costs one request timeout, not one per
    broker); an unreachable one is reported (``reachable: false`` and ``error``), a refused login or any other error
    is raised."""
    answers = ask_each([ArtemisManagement.from_params(broker, params) for broker in brokers],
                       lambda management: broker_report(management, include_prefixes, exclude_prefixes))
    reports = []
    for broker, answer in zip(brokers, answers):
        entry = {'name': broker['name'], 'datacentre': broker['datacentre']}
        if isinstance(answer, BrokerUnreachable):
            entry.update(reachable=False, error=str(answer), live=False, **_nothing_read())
        elif isinstance(answer, BrokerNotReady):
            entry.update(reachable=True, started=False, error=str(answer), live=False, **_nothing_read())
        elif isinstance(answer, Exception):
            raise answer
        else:
            entry.update(answer)
        reports.append(entry)
    return reports


def has_started(report):
    """The broker answers and has started (a broker that answers without its broker MBean is starting, stopping, or
    turning back into a backup: it shows no links nor queues, no more than one that does not answer)."""
    return bool(report.get('reachable')) and report.get('started', True)


def silent_brokers(reports):
    """Why each broker that has not started cannot be counted on yet."""
    return ['%s does not answer (%s)' % (report['name'], report.get('error', 'unreachable'))
            if not report.get('reachable') else
            '%s has not started (starting, stopping, or turning back into a backup)' % report['name']
            for report in reports if not has_started(report)]


def compare_sites(reports, tolerance=0):
    """Per queue, the durable messages on the live broker(s) of each datacentre, and whether they agree within
    ``tolerance``. A queue missing in a reachable datacentre counts as 0 there.

    Non-durable messages are left out: a broker that crashes loses them (Artemis keeps them in memory only) while the
    other datacentres keep their copies, and no replication event will ever bring the two counts together again."""
    counts = {}
    datacentres = sorted(set(report['datacentre'] for report in reports if report.get('live')))
    for report in reports:
        for queue in report.get('queues', []):
            per_dc = counts.setdefault(queue['name'], dict((dc, 0) for dc in datacentres))
            per_dc[report['datacentre']] += queue['durable_message_count']
    comparison = []
    for name in sorted(counts):
        values = counts[name].values()
        comparison.append({'queue': name, 'durable_message_counts': counts[name],
                           'in_sync': max(values) - min(values) <= tolerance})
    return comparison


def assess_datacentre(reports, datacentre, live=None, absent=(), link_targets=None, max_backlog=None,
                      settling=()):
    """What keeps a datacentre from being healthy (an empty list when it is): every broker of it but ``absent``
    answers and is started; exactly one is live (``live`` if given) and every other one is its backup, in sync
    when the pair replicates its journal; the live broker's mirror links are connected, and so are the links of
    the other datacentres' live brokers that lead here (``link_targets``: {(source datacentre, link name): target
    datacentre}), none of them missing; no such link holds more than ``max_backlog`` events. Exports to brokers outside the estate are
    not looked at: one that is down outside is no reason to stop the estate's restarts. An unreachable other datacentre is not a
    problem here (it may be the one that is down): its links are not looked at, nor a link the estate no longer gives
    (a mirror connection a broker keeps, routing nothing, until its queue is empty). Neither are the links between
    two datacentres when one of them is in ``settling`` (a broker there still runs settings it is about to
    restart with, which its peers may no longer accept, as when the mirrors move to another CA)."""
    problems = []
    mine = [report for report in reports if report['datacentre'] == datacentre]
    if not mine:
        return ['no broker of %s was given' % datacentre]
    present = [report for report in mine if report['name'] not in absent]
    problems.extend(silent_brokers(present))
    live_brokers = [report for report in present if report.get('live')]
    if len(live_brokers) != 1:
        problems.append('%s has %s live brokers (%s)' % (
            datacentre, len(live_brokers), ', '.join(report['name'] for report in live_brokers) or 'none'))
    elif live and live_brokers[0]['name'] != live:
        problems.append('%s is live in %s, not %s' % (live_brokers[0]['name'], datacentre, live))
    for report in present:
        if report.get('live') or not has_started(report):
            continue
        if not report.get('backup'):
            problems.append('%s is neither live nor a backup' % report['name'])
        elif not report.get('shared_store') and not report.get('replica_sync'):
            problems.append('%s is a backup not yet in sync with the live broker' % report['name'])
    if len(live_brokers) == 1 and len(present) > 1 and not live_brokers[0].get('shared_store') \
            and not live_brokers[0].get('replica_sync'):
        problems.append('%s has no backup in sync' % live_brokers[0]['name'])

    checked = []
    for report in reports:
        if not report.get('live'):
            continue
        # A link the estate gives this broker and it does not list: Artemis stops every bridge of a broker whose
        # bridge was refused a send (AMQ224058), until the broker restarts.
        listed = set(link['name'] for link in report.get('links', []) if link.get('listed', True))
        for (source, name), target in sorted((link_targets or {}).items()):
            if source == report['datacentre'] and datacentre in (source, target) \
                    and not set([source, target]) & set(settling) and name not in listed:
                problems.append('%s has no link %s to %s' % (report['name'], name, target))
        for link in report.get('links', []):
            if not link.get('listed', True):
                continue  # named above when the estate gives it; a leftover of a former estate is not health
            target = (link_targets or {}).get((report['datacentre'], link['name']))
            if link_targets is not None and target is None:
                continue  # one the estate no longer gives: a mirror connection kept until its queue is empty
            if set([report['datacentre'], target]) & set(settling):
                continue
            if report['datacentre'] == datacentre or target == datacentre:
                checked.append((report, link))
    for report, link in checked:
        if not link.get('connected'):
            problems.append('%s %s of %s is not connected'
                            % (link.get('engine', 'mirror'), link['name'], report['name']))
        elif max_backlog is not None and link.get('backlog', 0) > max_backlog:
            problems.append('%s %s of %s holds %s events (at most %s wanted)'
                            % (link.get('engine', 'mirror'), link['name'], report['name'], link['backlog'],
                               max_backlog))
    return problems
