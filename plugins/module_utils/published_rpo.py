# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The RPO the measurement last published for a route, read back (from the job's Prometheus textfile or from
Prometheus's HTTP API), and the failover's rule for it: a failover without an operator's figure goes ahead on its
own only when that RPO is known, recent and within the objective."""

from __future__ import annotations

import json
import re

# The job's names (spark/continuity_rpo/prometheus.py): the RPO of a route and the time it was evaluated at.
RPO_METRIC = 'continuity_artemis_rpo_seconds'
EVALUATED_METRIC = 'continuity_artemis_rpo_evaluated_timestamp_seconds'

_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {'\\\\': '\\', '\\"': '"', '\\n': '\n'}


class PublishedRpoError(Exception):
    pass


def parse_exposition(text):
    """{(name, frozenset of label pairs): value} of Prometheus text exposition."""
    samples = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise PublishedRpoError('line %d is not a Prometheus sample: %r' % (number, line[:200]))
        labels, rest = {}, match.group('labels') or ''
        while rest.strip():
            label = _LABEL.match(rest)
            if not label:
                raise PublishedRpoError('line %d has labels that cannot be read: %r' % (number, line[:200]))
            labels[label.group(1)] = re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], label.group(2))
            rest = rest[label.end():]
        try:
            value = float(match.group('value'))
        except ValueError:
            raise PublishedRpoError('line %d has a value that is not a number: %r' % (number, line[:200]))
        samples[(match.group('name'), frozenset(labels.items()))] = value
    return samples


def _route(source, target):
    return frozenset({('source_datacentre', source), ('target_datacentre', target)})


def rpo_from_textfile(text, source, target):
    """(rpo_seconds, evaluated_at) of the route in the job's textfile, or None when it publishes none."""
    samples = parse_exposition(text)
    rpo = samples.get((RPO_METRIC, _route(source, target)))
    evaluated_at = samples.get((EVALUATED_METRIC, _route(source, target)))
    if rpo is None or evaluated_at is None:
        return None
    return rpo, evaluated_at


def prometheus_query(metric, source, target):
    return '%s{source_datacentre="%s",target_datacentre="%s"}' % (metric, source, target)


def value_from_query_response(body, query):
    """The single value of an instant query's answer (Prometheus HTTP API), or None when it has no series."""
    try:
        answer = json.loads(body)
    except ValueError:
        raise PublishedRpoError('Prometheus did not answer %s with JSON' % query)
    if answer.get('status') != 'success':
        raise PublishedRpoError('Prometheus refused %s: %s' % (query, answer.get('error', answer.get('status'))))
    series = answer.get('data', {}).get('result', [])
    if not series:
        return None
    if len(series) > 1:
        # Two jobs publishing the same route (two measurement hosts, or a relabelled copy): no single figure.
        raise PublishedRpoError('%s has %d series in Prometheus, expected one: %s'
                                % (query, len(series), [s.get('metric') for s in series]))
    return float(series[0]['value'][1])


def weigh(rpo_seconds, age_seconds, objective_seconds, max_age_seconds, what='measured RPO'):
    """Whether a failover may go ahead unforced on this figure, and why (or why not), in words for the operator."""
    if rpo_seconds is None:
        return False, 'no %s for the route' % what
    figure = '%s %.1f s' % (what, rpo_seconds)
    if age_seconds is not None:
        figure += ' (evaluated %.0f s ago)' % age_seconds
        if age_seconds > max_age_seconds:
            return False, '%s is older than %s s: the measurement has not run since' % (figure, max_age_seconds)
    if rpo_seconds > objective_seconds:
        return False, '%s is above the RPO objective of %s s' % (figure, objective_seconds)
    return True, '%s is within the RPO objective of %s s' % (figure, objective_seconds)
