"""Materials-synthesis judging: the synthesis ontology, plot data, linking output and typed judge outputs."""

from scijudge.materials.inputs import (
    MIN_SOURCE_CHARS,
    check_source_text,
    prepare_linking_inputs,
    prepare_synthesis_inputs,
)
from scijudge.materials.ontology import (
    EXTRACTION_FAILED_MARKER,
    Conditions,
    Equipment,
    Material,
    ProcessStep,
    SynthesisOntology,
    infer_target_material,
    is_extraction_failure,
    parse_ontology,
    parse_syntheses,
)
from scijudge.materials.outputs import (
    FLAG_CODES,
    CriterionScore,
    LinkingFailureFlags,
    LinkingJudgment,
    SynthesisJudgment,
)
from scijudge.materials.plots import (
    Axis,
    LinkingOutput,
    PlotData,
    Series,
    SeriesRef,
    SynthesisLink,
    parse_linking_output,
    parse_plot_data,
)

__all__ = [
    "EXTRACTION_FAILED_MARKER",
    "FLAG_CODES",
    "MIN_SOURCE_CHARS",
    "Axis",
    "Conditions",
    "CriterionScore",
    "Equipment",
    "LinkingFailureFlags",
    "LinkingJudgment",
    "LinkingOutput",
    "Material",
    "PlotData",
    "ProcessStep",
    "Series",
    "SeriesRef",
    "SynthesisJudgment",
    "SynthesisLink",
    "SynthesisOntology",
    "check_source_text",
    "infer_target_material",
    "is_extraction_failure",
    "parse_linking_output",
    "parse_ontology",
    "parse_plot_data",
    "parse_syntheses",
    "prepare_linking_inputs",
    "prepare_synthesis_inputs",
]
