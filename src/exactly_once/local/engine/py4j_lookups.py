"""The JVM classes and static methods PySpark names by string, looked up once per gateway.

Every PySpark function (`F.col`, `F.lit`, `F.when`, ...) reaches the JVM as
`getattr(getattr(sc._jvm, "org.apache.spark.sql.functions"), name)(*args)`, and py4j answers
each `getattr` with a reflection command to the JVM: the class's name (or a short name through
the gateway's imports), then the method, searched among the class's hundreds of methods, before
the call itself. A call costs three round trips, and the two lookups cost the JVM more CPU than
the call: about 3,400 reflection commands in a warm ~100-record update of this project's
pipeline, 0.2-0.3 ms of the JVM's CPU each for a method or a short name (BENCHMARKS.md, "A
small update").

`remember(jvm)` makes the gateway's view remember each class it resolved, and each class
remember its static methods and nested classes: the same objects py4j would build again, so
every call is sent exactly as before. Only lookups that succeeded are kept, and never a field's
value (a static field may change; a method or a class does not), so a name that does not resolve
is asked again, and fails as before.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView


class _RememberedClass(JavaClass):
    """A JVM class whose static methods and nested classes are looked up once."""

    def __getattr__(self, name: str) -> Any:
        member = super().__getattr__(name)
        if isinstance(member, JavaClass):
            member = _RememberedClass(member._fqn, member._gateway_client)
        if isinstance(member, (JavaMember, JavaClass)):
            self.__dict__[name] = member  # next time found without __getattr__
        return member


class _RememberingView(JVMView):
    """A gateway's view of the JVM that keeps each class it resolved, under the name asked."""

    def __getattr__(self, name: str) -> Any:
        found = super().__getattr__(name)
        if isinstance(found, JavaClass):
            found = _RememberedClass(found._fqn, found._gateway_client)
            self.__dict__[name] = found
        return found


def remember(jvm: JVMView) -> None:
    """Make `jvm` (a gateway's view, `sc._jvm`: one per JVM, shared by every session of it)
    remember the classes and static methods it resolves from now on."""
    if type(jvm) is JVMView:
        jvm.__class__ = _RememberingView
