#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_remove_queue
short_description: Remove an empty queue and its address from every live broker of the estate
version_added: 0.5.0
description:
  - Removes the anycast queue O(queue) and then its address from every live broker in O(brokers) that has it
    (the brokers' address settings keep auto-created queues, so a drill's queue stays unless removed).
  - Refuses, before removing anything, while the queue holds a message on any broker (a drill's queue that still
    holds messages is evidence), naming the brokers and their counts.
extends_documentation_fragment:
  - continuity.artemis.management
options:
  queue:
    description: The queue; its address has the same name.
    type: str
    required: true
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Remove the drill's queue
  continuity.artemis.artemis_remove_queue:
    queue: drill.continuity
'''

RETURN = r'''
removed:
  description: The brokers the queue was removed from.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, ManagementError, broker_mbean, management_argument_spec)


def main():
    argument_spec = management_argument_spec()
    argument_spec.update(queue=dict(type='str', required=True))
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    queue = module.params['queue']
    holding, present = {}, []
    try:
        for broker in module.params['brokers']:
            management = ArtemisManagement.from_params(broker, module.params)
            if not management.status()['live'] or queue not in management.queue_names():
                continue
            present.append(management)
            count = management.message_count(queue, queue)
            if count:
                holding[broker['name']] = count
        if holding:
            module.fail_json(msg='queue %s still holds messages, nothing removed: %s' % (
                queue, ', '.join('%s %d' % item for item in sorted(holding.items()))), holding=holding)
        removed = []
        for management in present:
            if not module.check_mode and queue in management.queue_names():
                management.execute(broker_mbean(management.name), 'destroyQueue(java.lang.String,boolean,boolean)',
                                   queue, True, True)
            removed.append(management.name)
    except ManagementError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(removed), removed=removed)


if __name__ == '__main__':
    main()
