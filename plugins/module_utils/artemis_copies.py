# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The copies a datacentre holds of another datacentre's messages, and how to make a datacentre's queue hold only
the messages the source's queue of the same name still holds (artemis_bridge_reconcile, artemis_mirror_reconcile).

A message has one identity in every datacentre: where it was produced and its id there. Each engine spells it in its
own properties (an Identity): the bridge engine's broker plugin stamps ORIGIN_PROPERTY and SOURCE_ID_PROPERTY; the
mirror's target stores the source broker's node ID and the message's id there as broker properties of each copy. A
message without them was produced where it is: its origin is that datacentre (bridge) or its broker's node ID
(mirror), and its id its own."""

from __future__ import annotations

from collections import namedtuple

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ORIGIN_PROPERTY, SOURCE_ID_PROPERTY)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    BrokerNotReady, BrokerUnreachable, ManagementError, ask_each)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import is_application_queue

# Ranges OR-ed into one removal filter: one call per this many ranges.
RANGES_PER_FILTER = 50


class CopiesError(Exception):
    pass


class DatacentreDark(CopiesError):
    """No broker of a datacentre answers as live (powered off, killed, still loading its journal)."""


class Identity(namedtuple('Identity', 'origin_property id_property by_node')):
    """Where an engine keeps a copy's identity: its origin's and its id's property names; ``by_node``: the origin of
    an original is its broker's node ID (the mirror's spelling), not its datacentre's name."""

    def local_origin(self, datacentre, client):
        return client.status()['node_id'] if self.by_node else datacentre

    def of(self, message, local_origin):
        """(origin, id at the origin) of a message held where ``local_origin`` names the place."""
        properties = message['properties']
        source_id = properties.get(self.id_property)
        return (properties.get(self.origin_property) or local_origin,
                int(source_id) if source_id not in (None, '') else message['messageID'])

    def is_copy(self, message):
        return message['properties'].get(self.id_property) not in (None, '')

    def _name(self, name):
        # Artemis filters quote identifiers that are not Java identifiers (the mirror's x-opt-amq-*).
        return name if name.replace('_', 'a').isalnum() else '"%s"' % name

    def clause(self, origin, local_origin, low, high):
        origin_clause = ('%s IS NULL' % self._name(self.origin_property) if origin == local_origin
                         else "%s = '%s'" % (self._name(self.origin_property), origin.replace("'", "''")))
        return '(%s AND %s BETWEEN %d AND %d)' % (origin_clause, self._name(self.id_property), low, high)


BRIDGE_IDENTITY = Identity(ORIGIN_PROPERTY, SOURCE_ID_PROPERTY, by_node=False)
# What Artemis's mirror target stores with every copy it receives (AMQPMirrorControllerSource's BROKER_ID and
# INTERNAL_ID): the node ID of the broker that produced it, and its id there.
MIRROR_IDENTITY = Identity('x-opt-amq-bkr-id', 'x-opt-amq-mr-id', by_node=True)


def removal(held, kept, local_origin, scheme):
    """What to remove from the messages ``held`` by one broker (whose originals ``local_origin`` names) so that it
    keeps only the identities ``kept``: (Artemis filters, each for some ranges of copies' identities; ids of the
    originals to remove one by one). Ranges are taken in identity order over the held messages and the kept
    identities together, so a range never spans an identity to keep, even one whose copy arrives after the look."""
    copies, originals = {}, []
    for origin, source_id in kept:
        copies.setdefault(origin, {})[source_id] = True
    for message in held:
        origin, source_id = scheme.of(message, local_origin)
        keep = (origin, source_id) in kept
        if not scheme.is_copy(message):
            if not keep:
                originals.append(message['messageID'])
            continue
        copies.setdefault(origin, {}).setdefault(source_id, keep)
    clauses = []
    for origin in sorted(copies):
        ranges, start, end = [], None, None
        for source_id in sorted(copies[origin]):
            if copies[origin][source_id]:
                if start is not None:
                    ranges.append((start, end))
                start = None
                continue
            start, end = (source_id if start is None else start), source_id
        if start is not None:
            ranges.append((start, end))
        clauses += [scheme.clause(origin, local_origin, low, high) for low, high in ranges]
    filters = [' OR '.join(clauses[index:index + RANGES_PER_FILTER])
               for index in range(0, len(clauses), RANGES_PER_FILTER)]
    return filters, originals


def _is_live(status):
    """A broker's status answer: live, or not (a backup, not answering, still starting); any other failure raised."""
    if isinstance(status, (BrokerUnreachable, BrokerNotReady)):
        return False
    if isinstance(status, ManagementError):
        raise status
    return bool(status['live'])


class Datacentre(object):
    """The live brokers of one datacentre and their queues that ``wanted`` (a predicate on Artemis's queue entry)
    selects, read in ``scheme``'s identities."""

    def __init__(self, name, clients, wanted, scheme):
        self.name, self.scheme = name, scheme
        # Every broker at once: a pair's broker that is powered off costs one request timeout, not one per broker.
        clients = list(clients)
        answers = ask_each(clients, lambda client: client.status())
        self.live = [client for client, answer in zip(clients, answers) if _is_live(answer)]
        if not self.live:
            raise DatacentreDark('datacentre %s has no live broker that answers' % name)
        self.origins = {client: scheme.local_origin(name, client) for client in self.live}
        self.queues = {}
        for client, queues in zip(self.live, ask_each(self.live, lambda client: client.queues())):
            if isinstance(queues, ManagementError):
                raise queues
            for queue in queues:
                if is_application_queue(queue) and wanted(queue):
                    self.queues.setdefault(queue['name'], []).append((client, queue))

    def messages(self, name, waiting_only=False):
        """[(client, queue, message)] of every message the datacentre's queue ``name`` holds: browsed, and unless
        ``waiting_only`` scheduled and being delivered (not acknowledged yet)."""
        found = []
        for client, queue in self.queues.get(name, []):
            address, routing_type = queue['address'], queue['routingType'].lower()
            messages = client.browse(address, name, page_size=1000, routing_type=routing_type)
            if not waiting_only:
                messages += (client.scheduled(address, name, routing_type=routing_type)
                             + client.delivering(address, name, routing_type=routing_type))
            found += [(client, queue, message) for message in messages]
        return found

    def identity(self, client, message):
        return self.scheme.of(message, self.origins[client])

    def identities(self, name):
        return set(self.identity(client, message) for client, _queue, message in self.messages(name))

    def is_origin(self, origin):
        """Whether ``origin`` names this datacentre's originals."""
        return origin in self.origins.values()

    def remove(self, client, queue, messages, kept):
        """Remove from one broker's queue the ``messages`` whose identity is not ``kept``; how many went."""
        filters, originals = removal(messages, kept, self.origins[client], self.scheme)
        routing_type = queue['routingType'].lower()
        removed = 0
        for message_filter in filters:
            removed += int(client.remove_messages(queue['address'], queue['name'], message_filter,
                                                  routing_type=routing_type))
        for message_id in originals:
            removed += 1 if client.remove_message(queue['address'], queue['name'], message_id,
                                                  routing_type=routing_type) else 0
        return removed
