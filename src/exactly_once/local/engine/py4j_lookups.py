"""The JVM classes and static methods PySpark names by string, looked up once per gateway.

Every PySpark function (`F.col`, `F.lit`, `F.when`, ...) reaches the JVM as
`getattr(getattr(sc._jvm, "org.apache.spark.sql.functions"), name)(*args)`, and py4j answers
each `getattr` with a reflection command to the JVM: the class's name (or a short name through
the gateway's imports), then the method, searched among the class's hundreds of methods, before
the call itself. A call costs three round trips, and the two lookups cost the JVM more CPU than
the call: about 3,400 reflection commands in a warm ~100-record update of this project's
pipeline, 0.2-0.3 ms of the JVM's CPU each for a method or a short name (BENCHMARKS.md, "A
small update").

A class reached through its packages (`jvm.java.util.TimeZone`, as PySpark and Delta reach
most of theirs) costs a command per package too, each a failed class load across the JVM's class
path: about 190 an update of the pipeline.

`remember(jvm)` makes the gateway's view remember each class it resolved, each package once a
class was found in it, and each class its static methods and nested classes: the same objects
py4j would build again, so every call is sent exactly as before. Only lookups that succeeded
are kept, and never a field's value (a static field may change; a method or a class does not),
so a name that does not resolve is asked again, and fails as before. A package nothing was
found in is asked again too: to py4j any name that is no class is a package, and it may be a
class the JVM gains later (a jar added to the session).
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView


class _RememberedClass(JavaClass):
    """A JVM class whose static methods and nested classes are looked up once."""

    def __getattr__(self, name: str) -> Any:
        member = super().__getattr__(name)
        if isinstance(member, JavaClass):
            member = _RememberedClass(member._fqn, member._gateway_client)
        if isinstance(member, (JavaMember, JavaClass)):
            self.__dict__[name] = member  # next time found without __getattr__
        return member


class _RememberedPackage(JavaPackage):
    """A package that keeps the classes found in it, and is kept by its parent (a package or
    the view) once a class is found in it or below it."""

    def __init__(self, found: JavaPackage, parent: Any, name: str) -> None:
        super().__init__(found._fqn, found._gateway_client, found._jvm_id)
        self._parent, self._name = parent, name

    def __getattr__(self, name: str) -> Any:
        return _kept(self, name, JavaPackage.__getattr__(self, name))

    def _found_in(self) -> None:
        if self._parent is not None:  # kept from now on: no longer needs its parent
            self._parent.__dict__[self._name] = self
            parent, self._parent = self._parent, None
            if isinstance(parent, _RememberedPackage):
                parent._found_in()


def _kept(holder: Any, name: str, found: Any) -> Any:
    """What `holder` (the view or a package) resolved for `name`, remembered where it is sure."""
    if isinstance(found, JavaClass):
        found = _RememberedClass(found._fqn, found._gateway_client)
        holder.__dict__[name] = found
        if isinstance(holder, _RememberedPackage):
            holder._found_in()
    elif isinstance(found, JavaPackage):
        found = _RememberedPackage(found, holder, name)
    return found


class _RememberingView(JVMView):
    """A gateway's view of the JVM that keeps each class it resolved, under the name asked, and
    each package once a class was found in it."""

    def __getattr__(self, name: str) -> Any:
        return _kept(self, name, super().__getattr__(name))


def remember(jvm: JVMView) -> None:
    """Make `jvm` (a gateway's view, `sc._jvm`: one per JVM, shared by every session of it)
    remember the classes, packages and static methods it resolves from now on."""
    if type(jvm) is JVMView:
        jvm.__class__ = _RememberingView
