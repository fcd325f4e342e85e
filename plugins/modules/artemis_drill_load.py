#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_drill_load
short_description: Run a DR drill's synthetic load with a ledger of every message
version_added: 0.5.0
description:
  - Sends persistent messages to one drill address at a steady rate and consumes them again, over AMQP, until
    O(stop_file) appears (or O(max_seconds) pass). Both clients follow a failover list of brokers, so the load
    carries on across a swapover or failover of the datacentres.
  - Every message the brokers accepted and every delivery consumed is written to O(ledger) (the RPO job's drill
    ledger format), so that loss and duplicates are counted message by message. After the stop the producer
    stops and the consumer keeps taking messages until it has every accepted one or O(drain_timeout) passes.
  - Meant to run on the controller with C(async) and C(poll 0) beside the operation it measures (playbook
    C(continuity.artemis.drill)). Never touches an address other than O(address).
requirements:
  - python-qpid-proton
options:
  urls:
    description: AMQP URLs (C(amqps://host:port); the password is never sent over plain C(amqp://)) of the
      brokers, in failover order; each new connection of a client tries the next one.
    type: list
    elements: str
    required: true
  datacentres:
    description: The datacentre of each URL in O(urls), in the same order (for the ledger).
    type: list
    elements: str
    required: true
  user:
    description: The user the clients log in as; it may send to and consume from O(address).
    type: str
    required: true
  password:
    description: Its password.
    type: str
    required: true
  ca_path:
    description: CA certificate (PEM) that signed the brokers' certificates, for C(amqps) URLs.
    type: path
  address:
    description: The drill's anycast address (its queue has the same name).
    type: str
    required: true
  drill:
    description: The drill's id, in every ledger row.
    type: str
    required: true
  rate:
    description: Messages per second.
    type: float
    default: 100
  ledger:
    description: Where to write the ledger (JSON lines).
    type: path
    required: true
  stop_file:
    description: The load stops when this file exists.
    type: path
    required: true
  ready_file:
    description: Written once the first message has been accepted and consumed.
    type: path
  max_seconds:
    description: The load stops after this many seconds even without O(stop_file).
    type: int
    default: 3600
  drain_timeout:
    description: Seconds the consumer may take, after the stop, to receive every accepted message.
    type: int
    default: 120
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Start the drill's load
  continuity.artemis.artemis_drill_load:
    urls: [amqps://dc1-broker:5671, amqps://dc2-broker:5671]
    datacentres: [dc1, dc2]
    user: drill
    password: "{{ drill_password }}"
    address: drill.continuity
    drill: "{{ drill_id }}"
    rate: 100
    ledger: /var/tmp/drill/load.jsonl
    stop_file: /var/tmp/drill/stop
    ready_file: /var/tmp/drill/ready
  async: 7200
  poll: 0
'''

RETURN = r'''
sent:
  description: Messages written to a connection.
  returned: always
  type: int
accepted:
  description: Messages a broker settled as accepted.
  returned: always
  type: int
rejected:
  description: Messages a broker refused (for example at a fenced datacentre); the client sent the next one.
  returned: always
  type: int
uncertain:
  description: Messages whose connection dropped before the broker settled them (they may or may not be stored).
  returned: always
  type: int
consumed:
  description: Deliveries the consumer accepted (duplicates included).
  returned: always
  type: int
unconsumed:
  description: Accepted messages the consumer had not received when it stopped.
  returned: always
  type: int
duplicates:
  description: Deliveries beyond the first.
  returned: always
  type: int
disconnections:
  description: Connections lost, per client.
  returned: always
  type: dict
'''

import os
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.continuity.artemis.plugins.module_utils import amqp_ledger, drill


def _wait(condition, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def run_load(params):
    urls, datacentres = params['urls'], params['datacentres']
    producer = amqp_ledger.Producer(urls, params['user'], params['password'], params['address'],
                                    rate=params['rate'], id_prefix=params['drill'], ca_path=params['ca_path'],
                                    properties={'continuity_drill': params['drill']})
    consumer = amqp_ledger.Consumer(urls, params['user'], params['password'], params['address'],
                                    ca_path=params['ca_path'])
    deadline = time.monotonic() + params['max_seconds']
    consumer.start()
    producer.start()
    try:
        if params['ready_file']:
            _wait(lambda: producer.accepted_ids() and consumer.accepted_ids() or producer.error or consumer.error,
                  min(params['max_seconds'], 300))
            if producer.accepted_ids() and consumer.accepted_ids():
                with open(params['ready_file'], 'w', encoding='utf-8') as handle:
                    handle.write('ready\n')
        while not os.path.exists(params['stop_file']) and time.monotonic() < deadline:
            if producer.error or consumer.error:
                break
            time.sleep(0.2)
    finally:
        producer.stop(timeout=60)
        accepted = set(producer.accepted_ids())
        _wait(lambda: accepted <= set(consumer.accepted_ids()) or consumer.error, params['drain_timeout'])
        consumer.stop(timeout=60)
    rows = drill.ledger_rows(params['drill'], producer.ledger(), datacentres, [(consumer.ledger(), datacentres)])
    drill.write_ledger(params['ledger'], rows)
    received = consumer.accepted_ids()
    return {'sent': len(producer.sent_ids()), 'accepted': len(accepted), 'rejected': len(producer.rejected_ids()),
            'uncertain': len(producer.uncertain_ids()), 'consumed': len(received),
            'unconsumed': len(accepted - set(received)), 'duplicates': len(received) - len(set(received)),
            'disconnections': {'producer': producer.stats()['disconnections'],
                               'consumer': consumer.stats()['disconnections']}}


def main():
    module = AnsibleModule(
        argument_spec={
            'urls': {'type': 'list', 'elements': 'str', 'required': True},
            'datacentres': {'type': 'list', 'elements': 'str', 'required': True},
            'user': {'type': 'str', 'required': True},
            'password': {'type': 'str', 'required': True, 'no_log': True},
            'ca_path': {'type': 'path'},
            'address': {'type': 'str', 'required': True},
            'drill': {'type': 'str', 'required': True},
            'rate': {'type': 'float', 'default': 100},
            'ledger': {'type': 'path', 'required': True},
            'stop_file': {'type': 'path', 'required': True},
            'ready_file': {'type': 'path'},
            'max_seconds': {'type': 'int', 'default': 3600},
            'drain_timeout': {'type': 'int', 'default': 120},
        },
        supports_check_mode=False,
    )
    if amqp_ledger.PROTON_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib('python-qpid-proton'), exception=str(amqp_ledger.PROTON_IMPORT_ERROR))
    params = module.params
    if not params['urls'] or len(params['urls']) != len(params['datacentres']):
        module.fail_json(msg='urls and datacentres must name the same brokers: %d URLs, %d datacentres'
                         % (len(params['urls']), len(params['datacentres'])))
    if params['rate'] <= 0:
        module.fail_json(msg='rate must be above 0, got %s' % params['rate'])
    try:
        result = run_load(params)
    except (amqp_ledger.AmqpError, AssertionError, OSError) as exc:
        module.fail_json(msg='the drill load failed: %s' % exc)
    module.exit_json(changed=True, **result)


if __name__ == '__main__':
    main()
