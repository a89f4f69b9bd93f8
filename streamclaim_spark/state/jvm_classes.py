"""JVM classes and static methods reached through py4j by their names, looked up once per gateway.

py4j resolves ``jvm.org.apache.spark.sql.delta.DeltaLog`` one name at a time, a round trip each (seven
for that class), and ``.forTable`` on a class asks the JVM again whether it is a method: nine round
trips for one call. A command of the live path made a few hundred of those. ``java_class`` builds the
class' proxy from its full name without asking the JVM, and ``static_method`` keeps the method's
proxy, so a call costs the one round trip of the call itself.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember

# By (gateway client, full name): a new gateway (a session started after a stop) gets its own.
_classes: dict[tuple[int, str], JavaClass] = {}
_methods: dict[tuple[int, str, str], JavaMember] = {}


def java_class(jvm: Any, name: str) -> JavaClass:
    """The class ``name`` (``java.util.ArrayList``; a nested class as ``Outer$Inner``): constructors,
    static fields and methods, as ``jvm.<name>`` gives it, with no round trip to look it up."""
    client = jvm._gateway_client
    key = (id(client), name)
    found = _classes.get(key)
    if found is None or found._gateway_client is not client:
        found = _classes[key] = JavaClass(name, client)
    return found


def static_method(jvm: Any, class_name: str, method: str) -> JavaMember:
    """The static method ``method`` of ``class_name``, to call: one round trip a call."""
    client = jvm._gateway_client
    key = (id(client), class_name, method)
    found = _methods.get(key)
    if found is None or found.gateway_client is not client:
        found = _methods[key] = getattr(java_class(jvm, class_name), method)
    return found
