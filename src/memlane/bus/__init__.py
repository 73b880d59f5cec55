"""Change events between instances: doorbells (:mod:`.bell`), the event bus (:mod:`.hub`)
and the Redis/Valkey adapter (:mod:`.redis`). Nothing is imported here, so the stores can
use the bell without loading the rest."""
