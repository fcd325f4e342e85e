# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One client for Artemis's management API (Jolokia over HTTP(S)), shared by the modules, the tools and the tests.

Uses Ansible's own URL utilities, so a managed host needs nothing beyond Python.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.six.moves.http_client import HTTPException, RemoteDisconnected
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError
from ansible.module_utils.six.moves.urllib.parse import urlsplit, urlunsplit
from ansible.module_utils.urls import open_url

# One broker: its name (the broker name in broker.xml), datacentre, Jolokia URL and configured part in its HA pair.
BROKER_OPTIONS = dict(
    name=dict(type='str', required=True),
    datacentre=dict(type='str', required=True),
    management_url=dict(type='str', required=True),
    ha_role=dict(type='str', choices=['standalone', 'primary', 'backup']),
)


def management_argument_spec():
    """The options every module that talks to brokers shares (documented by the doc fragment
    continuity.artemis.management), as a new dict the module adds its own options to."""
    return dict(
        brokers=dict(type='list', elements='dict', required=True, options=BROKER_OPTIONS),
        management_user=dict(type='str', required=True),
        management_password=dict(type='str', required=True, no_log=True),
        validate_certs=dict(type='bool', default=True),
        ca_path=dict(type='path'),
        request_timeout=dict(type='int', default=10),
    )


def require_at_least(module, **minimums):
    """Fail, naming the option and its value, when one of the module's numeric options is below its minimum
    (argument specs check types, not ranges)."""
    low = ['%s must be at least %s (got %s)' % (name, minimum, module.params[name])
           for name, minimum in sorted(minimums.items())
           if module.params[name] is not None and module.params[name] < minimum]
    if low:
        module.fail_json(msg='; '.join(low))


class ManagementError(Exception):
    """A management request failed; the message names the broker and says what to fix."""


class BrokerUnreachable(ManagementError):
    """No answer from the broker's management endpoint (refused, timed out, no route): it may be down."""


class AuthenticationRefused(ManagementError):
    """The broker refused the management user (wrong password, or a user without a management role)."""


class MBeanNotFound(ManagementError):
    """The broker has no such MBean (no such queue or address, or a backup that holds none yet)."""


class OperationRefused(ManagementError):
    """The management user may not call this operation or read this attribute (management.xml's authorisation)."""


class BrokerNotReady(ManagementError):
    """The broker answers but is not started (starting, stopping, or failing over or back)."""


_QUOTED = {'\\': '\\\\', '"': '\\"', '*': '\\*', '?': '\\?', '\n': '\\n'}


def quote(value):
    """An ObjectName value, quoted as Java's ObjectName.quote does (Artemis names its MBeans so): backslash, quote,
    the wildcards * and ? and newline are escaped."""
    return '"%s"' % ''.join(_QUOTED.get(character, character) for character in value)


_UNQUOTED = dict((escaped[1], character) for character, escaped in _QUOTED.items())


def object_name_value(object_name, key):
    """The value of ``key`` in an ObjectName as the MBean server writes it (a quoted value unquoted), or None."""
    properties = object_name.split(':', 1)[-1]
    start = 0
    while start < len(properties):
        name, _equals, rest = properties[start:].partition('=')
        if rest.startswith('"'):
            value, index = [], 1
            while index < len(rest) and rest[index] != '"':
                if rest[index] == '\\' and index + 1 < len(rest):
                    index += 1
                    value.append(_UNQUOTED.get(rest[index], rest[index]))
                else:
                    value.append(rest[index])
                index += 1
            value, length = ''.join(value), index + 1
        else:
            value = rest.split(',', 1)[0]
            length = len(value)
        if name == key:
            return value
        start += len(name) + 1 + length + 1
    return None


# Artemis's Message.TEXT_TYPE.
TEXT_MESSAGE = 3
# A listing that failed on a consumer closing as Artemis listed it (see ArtemisManagement._list).
LIST_ATTEMPTS = 3
LIST_RETRY_DELAY_S = 0.5


def broker_mbean(broker):
    return 'org.apache.activemq.artemis:broker=%s' % quote(broker)


def queue_mbean(broker, address, queue, routing_type='anycast'):
    return '%s,component=addresses,address=%s,subcomponent=queues,routing-type=%s,queue=%s' % (
        broker_mbean(broker), quote(address), quote(routing_type.lower()), quote(queue))


def jolokia_endpoint(management_url):
    """(endpoint, Origin header) for a web server root (``/console/jolokia`` is added) or a full Jolokia URL."""
    parts = urlsplit(management_url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ManagementError('management_url %r is not an http(s) URL' % (management_url,))
    path = parts.path.rstrip('/')
    if 'jolokia' not in path:
        path += '/console/jolokia'
    netloc = parts.netloc.rpartition('@')[2]
    return urlunsplit((parts.scheme, netloc, path, '', '')), '%s://%s' % (parts.scheme, netloc)


def ask_each(clients, question):
    """``question(client)`` of every client at once: the answers in the clients' order, a
    :class:`ManagementError` in place of the answer of a broker that raised it. Brokers that do not answer then cost
    one request timeout together, not one each."""
    def answer(client):
        try:
            return question(client)
        except ManagementError as exc:
            return exc
    if not clients:
        return []
    with ThreadPoolExecutor(max_workers=min(len(clients), 16)) as pool:
        return list(pool.map(answer, clients))


class ArtemisManagement(object):
    """Jolokia requests to one broker. Every failure is a :class:`ManagementError` naming the broker."""

    def __init__(self, name, management_url, user, password, timeout=10, validate_certs=True, ca_path=None):
        self.name = name
        self.endpoint, self.origin = jolokia_endpoint(management_url)
        self.user = user
        self._password = password
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.ca_path = ca_path

    @classmethod
    def from_params(cls, broker, params):
        return cls(broker['name'], broker['management_url'], params['management_user'],
                   params['management_password'], timeout=params['request_timeout'],
                   validate_certs=params['validate_certs'], ca_path=params['ca_path'])

    # -- transport -----------------------------------------------------------------------------------------------

    def request(self, payload):
        what = '%s %s' % (payload.get('attribute') or payload.get('operation') or payload['type'],
                          payload.get('mbean', ''))
        try:
            response = open_url(self.endpoint, data=json.dumps(payload), method='POST', headers={
                'Content-Type': 'application/json', 'Accept': 'application/json', 'Origin': self.origin,
            }, url_username=self.user, url_password=self._password, force_basic_auth=True,
                timeout=self.timeout, validate_certs=self.validate_certs, ca_path=self.ca_path,
                follow_redirects='none', use_proxy=False)
            raw = response.read()
            content_type = response.headers.get('Content-Type') or 'no Content-Type'
        except HTTPError as exc:
            if exc.code in (401, 403):
                # Artemis's Jolokia answers 403 both to a wrong password and to a user without a management role.
                raise AuthenticationRefused('broker %s refused management_user %r (HTTP %s at %s): wrong user or '
                                            'password, or the user has no role in broker_management_roles'
                                            % (self.name, self.user, exc.code, self.endpoint))
            raise ManagementError('broker %s: HTTP %s %s at %s' % (self.name, exc.code, exc.reason, self.endpoint))
        except RemoteDisconnected:
            # The connection closed before a byte of the answer (a broker stopping, its host powered off): 2 x 2
            # seed 5 at b552ad0, where a swapover took it for a configuration error and aborted.
            raise BrokerUnreachable('broker %s closed the connection without an answer at %s'
                                    % (self.name, self.endpoint))
        except HTTPException as exc:
            raise ManagementError('broker %s: %s did not answer HTTP (%s); is it an https port?'
                                  % (self.name, self.endpoint, type(exc).__name__))
        except (socket.timeout, TimeoutError) as exc:
            raise BrokerUnreachable('broker %s: no answer within %ss at %s (%s)'
                                    % (self.name, self.timeout, self.endpoint, exc))
        except (URLError, OSError) as exc:
            reason = getattr(exc, 'reason', exc)
            if isinstance(reason, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
                # The broker closed the connection in the middle of the handshake: it is stopping or starting.
                raise BrokerUnreachable('broker %s closed the connection during the TLS handshake at %s: %s'
                                        % (self.name, self.endpoint, reason))
            if isinstance(reason, ssl.SSLError):
                # A certificate that the CA did not sign, or for another host: not a broker that is down.
                raise ManagementError('broker %s: TLS to %s failed: %s (is ca_path the estate\'s CA?)'
                                      % (self.name, self.endpoint, reason))
            raise BrokerUnreachable('broker %s is unreachable at %s: %s' % (self.name, self.endpoint, reason))
        try:
            answer = json.loads(raw)
        except ValueError:
            # What it said instead, its first bytes (no request echo: the password goes in a header): a broker
            # restarting after a lost lock answered so (2 x 2 seed 2 at b519279), what is not known yet.
            start = ' '.join(raw[:80].decode('utf-8', 'replace').split())
            raise ManagementError('broker %s: %s did not answer JSON (is it Jolokia?): %s, %r'
                                  % (self.name, self.endpoint, content_type, start))
        if answer.get('status') != 200:
            error_type = answer.get('error_type') or ''
            if error_type.endswith('InstanceNotFoundException'):
                if payload.get('mbean') == broker_mbean(self.name):
                    # A broker drops its own MBean while it turns back into a backup (failback) or starts.
                    raise BrokerNotReady('broker %s has no broker MBean yet (starting, or turning back into a '
                                         'backup)' % self.name)
                raise MBeanNotFound('broker %s has no %s' % (self.name, payload.get('mbean')))
            if answer.get('status') == 403 and 'not authorized' in (answer.get('error') or ''):
                raise OperationRefused('broker %s refused %s to management_user %r (it may not: %s)'
                                       % (self.name, what, self.user, answer.get('error')))
            if 'is not started' in (answer.get('error') or ''):
                raise BrokerNotReady('broker %s is not started (starting, stopping or failing over)' % self.name)
            raise ManagementError('broker %s: %s failed: %s' % (self.name, what, answer.get('error')))
        return answer.get('value')

    def read(self, mbean, attribute):
        return self.request({'type': 'read', 'mbean': mbean, 'attribute': attribute})

    def execute(self, mbean, operation, *arguments):
        return self.request({'type': 'exec', 'mbean': mbean, 'operation': operation, 'arguments': list(arguments)})

    # -- what the modules ask ------------------------------------------------------------------------------------

    def status(self):
        """Whether the broker is started and live (a backup of an HA pair is not), and its version. For an HA pair:
        ``backup`` (it is the pair's backup now), ``replica_sync`` (a live broker: a backup is attached and has
        finished its initial synchronisation; a backup: it is in sync) and ``shared_store``."""
        values = self.read(broker_mbean(self.name), ['Started', 'Active', 'Backup', 'ReplicaSync', 'SharedStore',
                                                     'Version', 'NodeID'])
        return {'started': values['Started'], 'live': bool(values['Active'] and not values['Backup']),
                'backup': bool(values['Backup']), 'replica_sync': bool(values['ReplicaSync']),
                'shared_store': bool(values['SharedStore']), 'version': values['Version'],
                'node_id': values['NodeID']}

    def broker_connections(self):
        """Every AMQP broker connection: name, uri, started, connected."""
        return json.loads(self.execute(broker_mbean(self.name), 'listBrokerConnections'))

    def bridges(self):
        """Every core bridge: name, queue, connected, pending (forwarded, not yet confirmed by the remote broker)."""
        found = []
        for name in sorted(self.read(broker_mbean(self.name), 'BridgeNames') or []):
            values = self.read('%s,component=bridges,name=%s' % (broker_mbean(self.name), quote(name)),
                               ['QueueName', 'Connected', 'MessagesPendingAcknowledgement'])
            found.append({'name': name, 'queue': values['QueueName'], 'connected': bool(values['Connected']),
                          'pending': int(values['MessagesPendingAcknowledgement'] or 0)})
        return found

    def _list(self, operation):
        """All rows of one of the broker's paged list operations (listQueues, listConnections, ...). Artemis fails a
        listing that meets a consumer closing as it goes (a NullPointerException: the consumer's session is already
        gone), which a listing a moment later does not meet: it is read again, LIST_ATTEMPTS times at most."""
        for attempt in range(1, LIST_ATTEMPTS + 1):
            try:
                return self._list_once(operation)
            except ManagementError as exc:
                if 'NullPointerException' not in str(exc) or attempt == LIST_ATTEMPTS:
                    raise
                time.sleep(LIST_RETRY_DELAY_S)

    def _list_once(self, operation):
        found, page = [], 1
        while True:
            answer = json.loads(self.execute(broker_mbean(self.name), '%s(java.lang.String,int,int)' % operation,
                                             json.dumps({'field': '', 'operation': '', 'value': ''}), page, 500))
            found += answer['data']
            if len(found) >= int(answer['count']) or not answer['data']:
                return found
            page += 1

    def queues(self):
        """Every queue, with its counters, as Artemis lists them (values as strings)."""
        return self._list('listQueues')

    def durable_message_counts(self):
        """Per queue name, its durable messages (those its broker keeps across a restart), in one request."""
        pattern = '%s,component=addresses,address=*,subcomponent=queues,routing-type=*,queue=*' % (
            broker_mbean(self.name))
        values = self.read(pattern, 'DurableMessageCount') or {}
        return dict((object_name_value(name, 'queue'), int(value['DurableMessageCount'] or 0))
                    for name, value in values.items())

    def queue_names(self):
        """The name of every queue, internal ones included."""
        return sorted(self.read(broker_mbean(self.name), 'QueueNames') or [])

    def message_count(self, address, queue, routing_type='anycast'):
        """Messages in a queue, those being delivered included."""
        return int(self.read(queue_mbean(self.name, address, queue, routing_type), 'MessageCount'))

    def pause_queue(self, queue):
        """Stop delivering from a queue (listQueues row) without persisting the pause."""
        return self.execute(queue_mbean(self.name, queue['address'], queue['name'], queue['routingType']), 'pause()')

    def resume_queue(self, queue):
        return self.execute(queue_mbean(self.name, queue['address'], queue['name'], queue['routingType']), 'resume')

    def list_messages(self, address, queue, message_filter=''):
        """The messages of an anycast queue matching an Artemis filter, each a map of headers and properties."""
        return json.loads(self.execute(queue_mbean(self.name, address, queue), 'listMessagesAsJSON(java.lang.String)',
                                       message_filter))

    def count_messages(self, address, queue, message_filter='', group_by=None, routing_type='anycast'):
        """How many messages of a queue match a filter; with ``group_by``, {value of that property: count}."""
        mbean = queue_mbean(self.name, address, queue, routing_type)
        if group_by is None:
            return int(self.execute(mbean, 'countMessages(java.lang.String)', message_filter))
        return json.loads(self.execute(mbean, 'countMessages(java.lang.String,java.lang.String)', message_filter,
                                       group_by))

    def browse(self, address, queue, message_filter='', page_size=200, routing_type='anycast'):
        """Every message of a queue matching a filter, page by page: messageID, userID, durable and ``properties``
        (every property, annotation and broker property by its plain name; a broker property, which filters see,
        over an annotation of the same name)."""
        found, page = [], 1
        while True:
            rows = self.execute(queue_mbean(self.name, address, queue, routing_type),
                                'browse(int,int,java.lang.String)', page, page_size, message_filter) or []
            for row in rows:
                properties = {}
                for key, values in row.items():
                    if key.endswith('Properties') and isinstance(values, dict):
                        for name, value in values.items():
                            area, _dot, plain = name.partition('.')
                            if area == 'extraProperties':
                                properties[plain] = value
                            else:
                                properties.setdefault(plain or name, value)
                found.append({'messageID': int(row['messageID']), 'userID': row.get('userID'),
                              'durable': bool(row.get('durable')), 'properties': properties})
            if len(rows) < page_size:
                return found
            page += 1

    def scheduled(self, address, queue, routing_type='anycast'):
        """The scheduled messages of a queue (browse does not list them), in the form browse gives."""
        rows = json.loads(self.execute(queue_mbean(self.name, address, queue, routing_type),
                                       'listScheduledMessagesAsJSON') or '[]')
        return [{'messageID': int(row['messageID']), 'userID': row.get('userID'), 'durable': bool(row.get('durable')),
                 'properties': row} for row in rows]

    def delivering(self, address, queue, routing_type='anycast'):
        """The messages of a queue being delivered to consumers, not yet acknowledged (browse does not list them)."""
        by_consumer = json.loads(self.execute(queue_mbean(self.name, address, queue, routing_type),
                                              'listDeliveringMessagesAsJSON') or '[]')
        return [{'messageID': int(row['messageID']), 'userID': row.get('userID'), 'durable': bool(row.get('durable')),
                 'properties': row} for consumer in by_consumer for row in consumer['elements']]

    def move_message(self, address, queue, message_id, to_queue):
        """Move one message of an anycast queue into the queue ``to_queue`` only (Artemis routes the copy to that
        queue's binding and acknowledges the original in one transaction)."""
        return self.execute(queue_mbean(self.name, address, queue), 'moveMessage(long,java.lang.String)', message_id,
                            to_queue)

    def copy_message(self, address, queue, message_id, to_queue):
        return self.execute(queue_mbean(self.name, address, queue), 'copyMessage(long,java.lang.String)', message_id,
                            to_queue)

    def remove_message(self, address, queue, message_id, routing_type='anycast'):
        return self.execute(queue_mbean(self.name, address, queue, routing_type), 'removeMessage(long)', message_id)

    def remove_messages(self, address, queue, message_filter, routing_type='anycast'):
        """Remove (acknowledge) the messages of a queue matching an Artemis filter, scheduled ones included; returns
        how many."""
        return self.execute(queue_mbean(self.name, address, queue, routing_type), 'removeMessages(java.lang.String)',
                            message_filter)

    def roles(self, address):
        """The roles that apply to ``address`` and what each may do."""
        return json.loads(self.execute(broker_mbean(self.name), 'getRolesAsJSON(java.lang.String)', address))

    def set_roles(self, match, permissions, order):
        """Replace the security setting of ``match`` at runtime (Artemis persists it in its journal, and it takes
        precedence over broker.xml's setting of the same match). ``permissions``: permission -> role names."""
        signature = 'addSecuritySettings(%s)' % ','.join(['java.lang.String'] * (len(order) + 1))
        return self.execute(broker_mbean(self.name), signature, match,
                            *[','.join(permissions.get(permission, [])) for permission in order])

    def send_message(self, address, properties, body=''):
        """Send a durable text message with the string ``properties`` to ``address``, as the management user."""
        mbean = '%s,component=addresses,address=%s' % (broker_mbean(self.name), quote(address))
        return self.execute(mbean, 'sendMessage(java.util.Map,int,java.lang.String,boolean,java.lang.String,'
                                   'java.lang.String)', properties, TEXT_MESSAGE, body, True, self.user, self._password)

    def address_settings(self, address):
        """The address settings Artemis applies to ``address`` (every match merged), JSON names."""
        return json.loads(self.execute(broker_mbean(self.name), 'getAddressSettingsAsJSON', address))

    def set_address_settings(self, match, settings_json):
        """Replace the address settings of ``match`` at runtime (persisted in the journal, like set_roles)."""
        return self.execute(broker_mbean(self.name), 'addAddressSettings(java.lang.String,java.lang.String)', match,
                            settings_json)

    def connections(self):
        """Every client connection: connectionID, users, remoteAddress, protocol, ..."""
        return self._list('listConnections')

    def consumers(self):
        """Every consumer: queue, address, remoteAddress (its connection's), user, ..."""
        return self._list('listConsumers')

    def producers(self):
        """Every producer: address (empty for an anonymous one), remoteAddress (its connection's), user, ..."""
        return self._list('listProducers')

    def close_connection(self, connection_id):
        return self.execute(broker_mbean(self.name), 'closeConnectionWithID(java.lang.String)', connection_id)
