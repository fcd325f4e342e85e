#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: measured_rpo
short_description: Read the RPO the measurement last published for a route and weigh it against an objective
version_added: 0.4.0
description:
  - "Reads C(continuity_artemis_rpo_seconds) and C(continuity_artemis_rpo_evaluated_timestamp_seconds) of one route
    (source datacentre to target datacentre), as the RPO job (role C(rpo_job)) last published them: from the job's
    Prometheus textfile on the host the module runs on (O(textfile)), or from Prometheus's HTTP API
    (O(prometheus_url))."
  - "Says whether the figure lets a failover go ahead unforced: it exists, it was evaluated at most O(max_age_seconds)
    ago, and it is at most O(objective_seconds). When O(last_known_lag_seconds) is given (the operator's own figure),
    that figure is weighed instead and nothing is read."
  - Never fails because the figure is missing, old or too high (C(within_objective) and C(reason) say so; the
    failover playbook refuses unless forced); fails only on bad input or an answer that cannot be read. Reads only.
options:
  source_datacentre:
    description: The datacentre whose loss is weighed (the route's source).
    type: str
    required: true
  target_datacentre:
    description: The datacentre the route replicates to.
    type: str
    required: true
  objective_seconds:
    description: The largest RPO a failover accepts without being forced.
    type: float
    required: true
  max_age_seconds:
    description: How old the published figure may be (since the job evaluated it). The job runs every
      C(rpo_job_schedule_minutes); older than this, the measurement has stopped and the figure says nothing.
    type: float
    default: 900
  last_known_lag_seconds:
    description: The operator's own figure (seconds). Given, it is weighed and nothing is read; empty, the published
      one is read.
    type: str
    default: ''
  textfile:
    description: The RPO job's Prometheus textfile (C(rpo_job_textfile)) on the host the module runs on.
    type: path
  prometheus_url:
    description: Base URL of a Prometheus that scrapes the job's metrics (e.g. C(https://prometheus.example:9090)).
    type: str
  validate_certs:
    description: Whether to validate Prometheus's TLS certificate.
    type: bool
    default: true
  ca_path:
    description: CA certificate (PEM) that signed Prometheus's certificate.
    type: path
  request_timeout:
    description: Seconds to wait for Prometheus.
    type: float
    default: 10
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Weigh the RPO the measurement host published for london -> frankfurt
  continuity.artemis.measured_rpo:
    source_datacentre: london
    target_datacentre: frankfurt
    objective_seconds: 60
    textfile: /var/lib/continuity-rpo/metrics/continuity_artemis.prom
  delegate_to: "{{ groups['rpo_job'][0] }}"
  register: measured

- name: The same from Prometheus
  continuity.artemis.measured_rpo:
    source_datacentre: london
    target_datacentre: frankfurt
    objective_seconds: 60
    prometheus_url: https://prometheus.example:9090
    ca_path: /etc/continuity/pki/ca.pem
  delegate_to: localhost
'''

RETURN = r'''
rpo_seconds:
  description: The figure weighed (published RPO, or the operator's lag); null when there is none.
  returned: always
  type: float
evaluated_at:
  description: When the job evaluated the published RPO (Unix time); null for the operator's figure or none.
  returned: always
  type: float
age_seconds:
  description: Seconds since C(evaluated_at), by the clock of the host the module runs on.
  returned: always
  type: float
origin:
  description: Where the figure comes from, C(operator), C(textfile:<path>) or C(prometheus:<url>).
  returned: always
  type: str
within_objective:
  description: Whether a failover may go ahead on this figure without being forced.
  returned: always
  type: bool
reason:
  description: Why (or why not), naming the figure and its age.
  returned: always
  type: str
'''

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.continuity.artemis.plugins.module_utils.published_rpo import (
    EVALUATED_METRIC, RPO_METRIC, PublishedRpoError, prometheus_query, rpo_from_textfile, value_from_query_response,
    weigh)


def _from_textfile(params):
    path = params['textfile']
    if not os.path.exists(path):
        return None, 'no textfile at %s (has the RPO job run on this host?)' % path
    with open(path, encoding='utf-8') as handle:
        found = rpo_from_textfile(handle.read(), params['source_datacentre'], params['target_datacentre'])
    return found, None


def _from_prometheus(params):
    values = []
    for metric in (RPO_METRIC, EVALUATED_METRIC):
        query = prometheus_query(metric, params['source_datacentre'], params['target_datacentre'])
        url = '%s/api/v1/query?query=%s' % (params['prometheus_url'].rstrip('/'), quote(query, safe=''))
        try:
            body = open_url(url, validate_certs=params['validate_certs'], ca_path=params['ca_path'],
                            timeout=params['request_timeout']).read()
        except Exception as exc:  # noqa: BLE001 - any transport error means the figure is unknown, said in reason
            return None, 'Prometheus at %s did not answer: %s' % (params['prometheus_url'], exc)
        values.append(value_from_query_response(body, query))
    return (None if None in values else tuple(values)), None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source_datacentre=dict(type='str', required=True),
            target_datacentre=dict(type='str', required=True),
            objective_seconds=dict(type='float', required=True),
            max_age_seconds=dict(type='float', default=900),
            last_known_lag_seconds=dict(type='str', default=''),
            textfile=dict(type='path'),
            prometheus_url=dict(type='str'),
            validate_certs=dict(type='bool', default=True),
            ca_path=dict(type='path'),
            request_timeout=dict(type='float', default=10),
        ),
        mutually_exclusive=[('textfile', 'prometheus_url')],
        supports_check_mode=True,
    )
    params = module.params
    if params['source_datacentre'] == params['target_datacentre']:
        module.fail_json(msg='source_datacentre and target_datacentre are both %r' % params['source_datacentre'])
    for name in ('objective_seconds', 'max_age_seconds', 'request_timeout'):
        if params[name] <= 0:
            module.fail_json(msg='%s must be above 0, not %s' % (name, params[name]))

    result = dict(changed=False, rpo_seconds=None, evaluated_at=None, age_seconds=None)
    lag = params['last_known_lag_seconds'].strip()
    if lag:
        try:
            result['rpo_seconds'] = float(lag)
        except ValueError:
            module.fail_json(msg='last_known_lag_seconds must be a number of seconds, not %r' % lag)
        if result['rpo_seconds'] < 0:
            module.fail_json(msg='last_known_lag_seconds must not be negative: %s' % lag)
        result['origin'] = 'operator'
        ok, reason = weigh(result['rpo_seconds'], None, params['objective_seconds'], params['max_age_seconds'],
                           what='last known lag')
        module.exit_json(within_objective=ok, reason=reason, **result)

    if params['textfile']:
        result['origin'] = 'textfile:%s' % params['textfile']
        read = _from_textfile
    elif params['prometheus_url']:
        result['origin'] = 'prometheus:%s' % params['prometheus_url']
        read = _from_prometheus
    else:
        module.exit_json(origin='none', within_objective=False,
                         reason='no lag given and nowhere to read a measured RPO from (no rpo_job host in the '
                                'inventory, no Prometheus URL)', **result)
    try:
        found, unreadable = read(params)
    except (PublishedRpoError, OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg='%s: %s' % (result['origin'], exc), **result)
    if found is not None:
        result['rpo_seconds'], result['evaluated_at'] = found
        result['age_seconds'] = round(time.time() - result['evaluated_at'], 1)
    ok, reason = weigh(result['rpo_seconds'], result['age_seconds'], params['objective_seconds'],
                       params['max_age_seconds'])
    if unreadable:
        reason = unreadable
    elif found is None:
        reason = 'no RPO is published for %s -> %s in %s' % (
            params['source_datacentre'], params['target_datacentre'], result['origin'])
    module.exit_json(within_objective=ok, reason=reason, **result)


if __name__ == '__main__':
    main()
